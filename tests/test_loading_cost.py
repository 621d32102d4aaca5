"""GPU101 and `analysis/loading_cost.py`: a loader without workers is reported when a pass loads in the training
process for longer than the fix's workers take to start again (with the estimate in the message), or when the code
does not show what it loads; it is silent when a pass loads faster than that."""

from __future__ import annotations

from tests.conftest import diagnostics, findings

ONLY = {"select": ("GPU101",)}

MNIST = """\
    import torch
    import torchvision
    from torchvision import transforms

    train = torchvision.datasets.MNIST("data", train=True, download=True, transform=transforms.ToTensor())
    DATASET
    loader = torch.utils.data.DataLoader(dataset, batch_size=64, shuffle=True)
    model = torch.nn.Linear(784, 10).cuda()
    for epoch in range(10):
        for x, y in loader:
            loss = model(x.view(-1, 784).cuda()).sum()
            loss.backward()
"""


def test_a_full_mnist_pass_is_reported_with_its_loading_time():
    """60,000 digits at ~0.025 ms each (to a PIL image, then `ToTensor`): ~1.5 s a pass in the training process."""
    [d] = diagnostics(MNIST.replace("DATASET", "dataset = train"), **ONLY)
    assert d.message == (
        "`DataLoader` has no `num_workers`: batches load in the training process, at least ~1.5 s a pass "
        "(60,000 samples of MNIST's train split)"
    )


def test_a_small_subset_loads_faster_than_workers_start():
    """3,000 digits: ~75 ms a pass, less than the ~185 ms the fix's 8 workers take to start again each pass."""
    assert findings(MNIST.replace("DATASET", "dataset = torch.utils.data.Subset(train, range(3000))"), **ONLY) == []
    # the count through a constant written as a product
    source = MNIST.replace("DATASET", "N = 64 * 30\ndataset = torch.utils.data.Subset(train, indices=range(N))")
    assert findings(source, **ONLY) == []


def test_a_subset_large_enough_is_still_reported():
    [d] = diagnostics(MNIST.replace("DATASET", "dataset = torch.utils.data.Subset(train, range(20000))"), **ONLY)
    assert d.message.endswith("at least ~500 ms a pass (20,000 samples of a Subset of MNIST's train split)")


def test_a_distributed_sampler_draws_at_most_the_dataset():
    source = MNIST.replace("DATASET", "dataset = torch.utils.data.Subset(train, range(3000))").replace(
        "shuffle=True", "sampler=torch.utils.data.distributed.DistributedSampler(dataset)"
    )
    assert findings(source, **ONLY) == []
    other = source.replace("DistributedSampler(dataset)", "DistributedSampler(train)")  # another dataset's sampler
    assert findings(other, **ONLY) == ["7:10 GPU101"]


SHOWN = """\
    import torch
    import torchvision
    from torchvision import transforms

    test = torchvision.datasets.MNIST("data", train=False, transform=transforms.ToTensor())
    test_loader = torch.utils.data.DataLoader(test, batch_size=64)
    model = torch.nn.Linear(784, 784).cuda()
    for epoch in range(10):
        train_one_epoch(model)
        USE
"""


def test_one_batch_from_a_new_iterator_each_epoch_is_cheap():
    """`next(iter(test_loader))` once per epoch: one batch of 64 digits, ~2 ms, against ~185 ms of worker start."""
    source = SHOWN.replace("USE", "x, _ = next(iter(test_loader))\n    show(model(x.view(-1, 784).cuda()))")
    assert findings(source, **ONLY) == []


def test_a_whole_pass_over_the_same_loader_each_epoch_is_reported():
    source = SHOWN.replace("USE", "for x, _ in test_loader:\n            model(x.view(-1, 784).cuda()).sum().backward()")
    [d] = diagnostics(source, **ONLY)
    assert d.message.endswith("at least ~250 ms a pass (10,000 samples of MNIST's test split)")


def test_a_dataset_of_unknown_work_is_reported_without_an_estimate():
    source = MNIST.replace("DATASET", "dataset = ImageFiles('data')")
    [d] = diagnostics(source, **ONLY)
    assert d.message == "`DataLoader` has no `num_workers`: batches load in the training process"


def test_a_cheap_pass_leaves_pinning_silent_too():
    """3,000 digits a pass in batches of 1,000 (3 MB each, copied pageable): GPU101 is silent (the pass loads in
    ~75 ms) and GPU102 stays with it (`loading_dominates`): three copies a pass save nothing worth a finding."""
    source = MNIST.replace("DATASET", "dataset = torch.utils.data.Subset(train, range(3000))").replace("batch_size=64", "batch_size=1000")
    assert findings(source, select=("GPU101", "GPU102")) == []
    full = MNIST.replace("DATASET", "dataset = train").replace("batch_size=64", "batch_size=1000")
    assert findings(full, select=("GPU101", "GPU102")) == ["7:10 GPU101"]
