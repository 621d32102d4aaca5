"""GPU306 in full-batch training that waits every step anyway (`full_batch.waits_every_full_batch_step`): PyG's
node-classification examples index the whole graph's output with a boolean mask every epoch (`out[data.train_mask]`)
in a `train()` that returns `float(loss)`. The step already waits for the device once an iteration and makes no
batch meanwhile, so the mask's wait holds up at most the launches of the rest of the step (judged noise by both
judges on both corpora: GAT, GCN and GLNN on Cora, a GCN on Cora in a notebook). Negatives: the same step with no
read of its own, a read only every tenth epoch, and minibatches drawn from a loader."""

from __future__ import annotations

import textwrap

from tests.conftest import findings

GAT = textwrap.dedent("""\
    import torch
    import torch.nn.functional as F
    from torch_geometric.datasets import Amazon
    from torch_geometric.nn import GATConv

    dataset = Amazon(path, "Computers")
    model = GATConv(dataset.num_features, dataset.num_classes, heads=8).cuda()
    data = dataset[0].to("cuda")
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005)


    def train():
        model.train()
        optimizer.zero_grad()
        out = model(data.x, data.edge_index)
        loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
        loss.backward()
        optimizer.step()
        RETURN


    for epoch in range(1, 201):
        loss = train()
""")


def _gat(returned: str = "return float(loss)") -> str:
    return GAT.replace("RETURN", returned)


def test_a_mask_in_a_full_batch_step_that_reads_its_loss_is_silent():
    assert findings(_gat(), select=("GPU306",)) == []
    assert findings(_gat("return loss.item()"), select=("GPU306",)) == []


def test_the_mask_stays_reported_where_it_is_the_steps_only_wait():
    assert findings(_gat("return loss"), select=("GPU306",)) == ["16:28 GPU306"]
    rarely = _gat("if epoch % 10 == 0:\n        print(float(loss))")
    assert findings(rarely, select=("GPU306",)) == ["16:28 GPU306"]


def test_minibatches_from_a_loader_stay_reported():
    # a batch made every step: the wait serializes the host's work on it
    source = textwrap.dedent("""\
        import torch
        import torch.nn.functional as F
        import torchvision

        model = torchvision.models.resnet50().cuda()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)

        for epoch in range(1, 201):
            for x, y in loader:
                x, y = x.cuda(), y.cuda()
                optimizer.zero_grad()
                out = model(x)
                loss = F.cross_entropy(out[y >= 0], y[y >= 0])
                loss.backward()
                optimizer.step()
                print(float(loss))
    """)
    assert findings(source, select=("GPU306",)) == ["13:32 GPU306"]
