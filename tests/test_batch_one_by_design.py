"""GPU103 and a batch size of 1 the code is written for (`loader_flow.feeds_a_first_sample`): the loop feeds the
model the element `[0]` of a field it unpacks (`sentence = sentence[0].to(device)`), or of the whole batch when
each item is one tensor (`calc_sent_loss(sent[0])` over a Dataset whose `__getitem__` returns
`torch.as_tensor(...)`): one variable-length sentence a step, a larger batch would drop samples or fail to collate
(both judges: "batch1-by-design", noise, on the fourteenth corpus's BoW and log-linear LM notebooks). Negatives: the
same loader whose batch is fed whole, and a tuple batch's `batch[0]` (its first field)."""

from __future__ import annotations

import textwrap

from tests.conftest import findings

BOW = textwrap.dedent("""\
    import torch
    from torch.utils.data import DataLoader, Dataset


    class TextDataset(Dataset):
        def __init__(self, data):
            self.data = data

        def __len__(self):
            return len(self.data)

        def __getitem__(self, idx):
            return ITEM


    loader = DataLoader(TextDataset(train_data), batch_size=1, shuffle=True)
    model = BoW(nwords, ntags).cuda()
    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(10):
        for LOOP
            loss = criterion(output, tag.cuda())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
""")
PAIR = "torch.as_tensor(self.data[idx][0]), torch.as_tensor(self.data[idx][1])"
SENTENCE = "torch.as_tensor(self.data[idx])"


def _bow(item: str, loop: str) -> str:
    return BOW.replace("ITEM", item).replace("LOOP", loop)


def test_a_first_sample_fed_to_the_model_is_batch_one_by_design():
    unpacked = "sentence, tag in loader:\n        sentence = sentence[0].cuda()\n        output = model(sentence)"
    assert findings(_bow(PAIR, unpacked), select=("GPU103",)) == []
    whole = "sent in loader:\n        output = model(sent[0].cuda())\n        tag = sent[0][1:]\n        words = len(sent)"
    assert findings(_bow(SENTENCE, whole), select=("GPU103",)) == []


def test_a_batch_fed_whole_stays_reported():
    fed_whole = "sentence, tag in loader:\n        output = model(sentence.cuda())"
    assert findings(_bow(PAIR, fed_whole), select=("GPU103",)) == ["16:10 GPU103"]
    # a tuple batch: `batch[0]` is its first field, not a first sample
    tuple_batch = "batch in loader:\n        output = model(batch[0].cuda())\n        tag = batch[1]"
    assert findings(_bow(PAIR, tuple_batch), select=("GPU103",)) == ["16:10 GPU103"]
