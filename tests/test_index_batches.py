"""GPU103 on a loader of graph indices that must stay at batch size 1 (`loader_flow.trains_on_first_sample`):
GCNII's `DataLoader(torch.LongTensor(range(20)), batch_size=1)` hands out one index per step and the step takes a
whole graph by `batch[0]` and slices by `nodes[batch]`; a larger batch would skip graphs (or fail on the slice).
A loader of a TensorDataset (where `batch[0]` is a field) and a step that uses the whole batch stay reported."""

from __future__ import annotations

from tests.conftest import diagnostics, findings

SOURCE = """\
import torch
import torch.utils.data as Data

device = torch.device("cuda")
adj, feat, labels, nodes = torch.load("ppi.pt")
model = torch.nn.Linear(50, 121).to(device)
optimizer = torch.optim.Adam(model.parameters())
loss_fcn = torch.nn.BCEWithLogitsLoss()
{dataset}
loader = Data.DataLoader(dataset=idx, batch_size=1, shuffle=True)
for epoch in range(100):
    model.train()
    for step, batch in enumerate(loader):
        batch_feature = feat[batch[0]].to(device)
        batch_label = labels[batch[0]].to(device)
        optimizer.zero_grad()
        output = model(batch_feature)
        loss = loss_fcn(output[:nodes[batch]], batch_label[:nodes[batch]])
        loss.backward()
        optimizer.step()
"""


def gpu103(dataset: str, step: str = "") -> list[str]:
    source = SOURCE.format(dataset=dataset)
    if step:
        source = source.replace("        batch_feature = feat[batch[0]].to(device)", step)
    return findings(source, select=("GPU103",))


def test_a_loader_of_graph_indices_whose_step_takes_one_graph_is_not_reported():
    assert gpu103("idx = torch.LongTensor(range(20))") == []
    assert gpu103("idx = torch.arange(20)") == []


def test_a_tensor_dataset_batch_whose_first_field_is_taken_is_still_reported():
    [d] = diagnostics(SOURCE.format(dataset="idx = Data.TensorDataset(torch.arange(20))"), select=("GPU103",))
    assert d.location.row == 10
    assert "below 16" in d.message


def test_a_step_that_uses_the_whole_index_batch_is_still_reported():
    assert gpu103("idx = torch.arange(20)", step="        batch_feature = feat[batch].to(device)") == ["10:10 GPU103"]
