#!/usr/bin/env python3
"""Train a small MLP classifier on synthetic data: a plain single-process
PyTorch script (model, data loader, optimizer, loop).  train_kvsd.py is the
same script, data-parallel through kvsd: it differs by two lines.

    python3 examples/torch/train.py
    deploy/kvs-launch -n 2 -s 1 -- python3 examples/torch/train_kvsd.py

Each worker shuffles with its own (unseeded) order, so the W workers of a
step train on W different batches; DistributedOptimizer makes worker 0's
initial weights everyone's and averages the gradients.  (For disjoint
shards, give the DataLoader a torch.utils.data.DistributedSampler with
num_replicas=kvt.size() and rank=kvt.rank().)
"""
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset
import kvsd.torch as kvt; kvt.init()  # noqa: E702  join the job kvs-launch started

EPOCHS, BATCH = 6, 64


def make_data(n=2048, features=32, classes=4):
    """Points labelled by a fixed random teacher network (the same on every
    run: its own generator)."""
    g = torch.Generator().manual_seed(1234)
    x = torch.randn(n, features, generator=g)
    teacher = torch.randn(features, classes, generator=g)
    y = (x @ teacher + 0.1 * torch.randn(n, classes, generator=g)).argmax(1)
    return TensorDataset(x, y)


model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(),
                      nn.Linear(128, 4))
loader = DataLoader(make_data(), batch_size=BATCH, shuffle=True)
loss_fn = nn.CrossEntropyLoss()
optimizer = kvt.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), model.named_parameters())

for epoch in range(EPOCHS):
    total, correct, seen = 0.0, 0, 0
    for x, y in loader:
        optimizer.zero_grad()
        out = model(x)
        loss = loss_fn(out, y)
        loss.backward()
        optimizer.step()
        total += loss.item() * len(y)
        correct += (out.argmax(1) == y).sum().item()
        seen += len(y)
    print("epoch %d loss %.4f accuracy %.3f" % (epoch, total / seen, correct / seen), flush=True)
