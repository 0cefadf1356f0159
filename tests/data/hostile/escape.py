"""Hostile: leave processes behind that ignore signals, in a new session, with no pipes."""
import os
import subprocess
import sys

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(x)

LINGER = "import signal, time\nfor s in (signal.SIGALRM, signal.SIGTERM, signal.SIGHUP, signal.SIGINT):\n    signal.signal(s, signal.SIG_IGN)\ntime.sleep(600)"


def linger(model: Net, x):
    for new_session in (True, False):
        try:
            subprocess.Popen([sys.executable, "-c", LINGER, "MARKER-popen"], start_new_session=new_session, close_fds=True,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            break
        except OSError:
            continue
    if os.fork() == 0:
        try:
            os.setsid()
        except OSError:
            pass
        if os.fork() == 0:
            os.closerange(0, 1024)
            os.execv(sys.executable, [sys.executable, "-c", LINGER, "MARKER-forked"])
        os._exit(0)
    return model(x).numpy()


def predict(model: Net, x):
    # The real bug beside the attack: it must stay confirmed.
    return model(x).numpy()

