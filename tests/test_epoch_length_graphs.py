"""GPU104 and `analysis/epoch_length.py` on graph datasets and the default run's branch: PyG's ModelNet (a documented
number of shapes a split), `ClusterLoader(ClusterData(data, num_parts=N))` (N partitions a pass), and a dataset chosen
by `if args.dataset == "...":` read with the option's default. By default GPU104 reports only a pass shown short."""

from __future__ import annotations

from tests.conftest import gpu104_text, diagnostics, findings

SHIPPED = {"select": ("GPU104",), "rule_options": ()}  # the shipped defaults: `unproven-cost = false`

MODELNET = """\
    import torch
    import torch_geometric.transforms as T
    from torch_geometric.datasets import ModelNet
    from torch_geometric.loader import DataLoader

    pre_transform, transform = T.NormalizeScale(), T.SamplePoints(1024)
    train_dataset = ModelNet("data/ModelNet10", "10", TRAIN, transform, pre_transform)
    train_loader = DataLoader(train_dataset, batch_size=BATCH, shuffle=True, num_workers=6)
    model = torch.nn.Linear(3, 10).cuda()
    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(200):
        for data in train_loader:
            optimizer.zero_grad()
            model(data.pos.cuda()).sum().backward()
            optimizer.step()
"""


def test_a_modelnet10_pass_is_short_and_reported():
    """3,991 training shapes at batch 32: 125 steps, at least ~0.1 s; restarting 6 workers (~155 ms) is more."""
    [d] = diagnostics(MODELNET.replace("TRAIN", "True").replace("BATCH", "32"), **SHIPPED)
    assert gpu104_text(d) == (
        "`DataLoader` workers are shut down and started again for every pass of the loop at line 11: a pass is 125 "
        "steps of 32 over ModelNet10's train split (3,991 samples), at least ~0.1 s; restarting 6 workers costs ~155 ms a pass, more than all of it"
    )


def test_modelnet_keywords_and_the_forty_class_test_split():
    source = MODELNET.replace('"10", TRAIN, transform, pre_transform', 'name="40", train=False, transform=transform')
    [d] = diagnostics(source.replace("BATCH", "32"), **SHIPPED)
    assert "78 steps of 32 over ModelNet40's test split (2,468 samples)" in gpu104_text(d)


def test_a_modelnet_split_the_code_does_not_show_is_unknown():
    """`train=args.train` of no known value: the pass is unknown, so silent by default."""
    assert findings(MODELNET.replace("TRAIN", "flag").replace("BATCH", "32"), **SHIPPED) == []


def test_a_modelnet_pass_of_one_shape_a_step_is_long():
    """ModelNet40's 9,843 training shapes one a step: at least ~9.8 s, the restart ~1.6 %: not reported."""
    source = MODELNET.replace('"10", TRAIN', '"40", True').replace("BATCH", "1")
    assert findings(source, **SHIPPED) == []


def test_another_graph_dataset_is_unknown():
    source = MODELNET.replace("ModelNet(", "ShapeNet(").replace("import ModelNet", "import ShapeNet")
    assert findings(source.replace("TRAIN", "True").replace("BATCH", "32"), **SHIPPED) == []


CLUSTERS = """\
    import torch
    from torch_geometric.datasets import Reddit
    from torch_geometric.loader import ClusterData, ClusterLoader

    data = Reddit("data/Reddit")[0]
    cluster_data = ClusterData(data, num_parts=PARTS, recursive=False)
    train_loader = ClusterLoader(cluster_data, BATCH shuffle=True, num_workers=12)
    model = torch.nn.Linear(602, 41).cuda()
    optimizer = torch.optim.Adam(model.parameters())
    for epoch in range(30):
        for batch in train_loader:
            optimizer.zero_grad()
            model(batch.x.cuda()).sum().backward()
            optimizer.step()
"""


def test_a_cluster_loader_pass_is_its_partitions_over_the_batch():
    """1,500 partitions, 20 a step: 75 steps, at least ~75 ms; restarting 12 workers (~245 ms) is more."""
    [d] = diagnostics(CLUSTERS.replace("PARTS", "1500").replace("BATCH", "batch_size=20,"), **SHIPPED)
    assert gpu104_text(d) == (
        "`DataLoader` workers are shut down and started again for every pass of the loop at line 10: a pass is 75 "
        "steps of 20 over a ClusterData of 1,500 partitions (1,500 samples), at least ~75 ms; restarting 12 workers "
        "costs ~245 ms a pass, more than all of it"
    )


def test_a_cluster_loader_without_a_batch_size_takes_one_partition_a_step():
    [d] = diagnostics(CLUSTERS.replace("PARTS", "50").replace("BATCH", ""), **SHIPPED)
    assert "a pass is 50 steps of 1 over a ClusterData of 50 partitions" in gpu104_text(d)


def test_a_cluster_loader_of_many_partitions_one_a_step_is_long():
    """15,000 partitions one a step: at least ~15 s, the restart ~1.6 %: not reported."""
    assert findings(CLUSTERS.replace("PARTS", "15000").replace("BATCH", "batch_size=1,"), **SHIPPED) == []


def test_a_cluster_count_the_code_does_not_show_is_unknown():
    assert findings(CLUSTERS.replace("PARTS", "parts()").replace("BATCH", "batch_size=20,"), **SHIPPED) == []


CHOSEN = """\
    import argparse
    import torch
    from torch_geometric.datasets import ModelNet, MedShapeNet
    from torch_geometric.loader import DataLoader

    parser = argparse.ArgumentParser()
    parser.add_argument("--dataset", type=str, default=DEFAULT)
    args = parser.parse_args()
    if args.dataset == "modelnet40":
        train_dataset = ModelNet("data", "40", True)
    elif args.dataset == "medshapenet":
        dataset = MedShapeNet(root="data", size=50)
        train_dataset = dataset[train_indices]
    elif args.dataset == "modelnet10":
        train_dataset = ModelNet("data", "10", True)
    else:
        raise ValueError(args.dataset)
    train_loader = DataLoader(train_dataset, batch_size=32, shuffle=True, num_workers=6)
    model = torch.nn.Linear(3, 10).cuda()
    for epoch in range(200):
        for data in train_loader:
            model(data.pos.cuda()).sum().backward()
"""


def test_the_dataset_the_default_run_builds_sets_the_pass():
    """`--dataset` defaults to "modelnet10": the run with the defaults takes that branch only, whatever the others
    would build (a MedShapeNet subset of unknown size)."""
    [d] = diagnostics(CHOSEN.replace("DEFAULT", '"modelnet10"'), **SHIPPED)
    assert "125 steps of 32 over ModelNet10's train split (3,991 samples)" in gpu104_text(d)
    [d] = diagnostics(CHOSEN.replace("DEFAULT", '"modelnet40"'), **SHIPPED)
    assert "308 steps of 32 over ModelNet40's train split (9,843 samples)" in gpu104_text(d)


def test_a_default_run_branch_of_unknown_size_or_no_default_stays_unknown():
    assert findings(CHOSEN.replace("DEFAULT", '"medshapenet"'), **SHIPPED) == []
    assert findings(CHOSEN.replace(", default=DEFAULT", ""), **SHIPPED) == []
