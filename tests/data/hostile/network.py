"""Hostile: reach listeners on this machine over TCP, UDP and unix sockets."""
import socket

PORTS = {"tcp": 0, "udp": 0}
UNIX_PATHS = ["UNIX_PATH"]
ABSTRACT = "ABSTRACT_NAME"

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)



def reach(model: Net, x):
    attempts = [
        (socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", PORTS["tcp"])),
        (socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", PORTS["udp"])),
        (socket.AF_UNIX, socket.SOCK_STREAM, "\0" + ABSTRACT),
    ] + [(socket.AF_UNIX, socket.SOCK_STREAM, path) for path in UNIX_PATHS]
    for family, kind, address in attempts:
        try:
            with socket.socket(family, kind) as sock:
                sock.settimeout(1)
                if kind == socket.SOCK_DGRAM:
                    sock.sendto(b"hostile", address)
                else:
                    sock.connect(address)
                    sock.sendall(b"hostile")
        except OSError:
            pass
    return model(x).numpy()


def predict(model: Net, x):
    # The real bug beside the attack: it must stay confirmed.
    return model(x).numpy()

