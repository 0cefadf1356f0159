# source: https://github.com/meta-pytorch/tnt/pull/551
# category: DL402
# expect: flag 28, 80
# evidence: a training unit logs its loss tensor to InMemoryLogger; scalar_to_float calls scalar.cpu().numpy() on a tensor that requires grad and the first log call raises "Can't call numpy() on Tensor that requires grad".
import logging
from collections import OrderedDict
from time import monotonic
from typing import Dict, Mapping, Union

import numpy as np
from numpy import ndarray
import torch
from torch import Tensor

Scalar = Union[Tensor, ndarray, int, float]
logger: logging.Logger = logging.getLogger(__name__)


def scalar_to_float(scalar: Scalar) -> float:
    if isinstance(scalar, Tensor):
        scalar = scalar.squeeze()
        numel = scalar.numel()
        if numel != 1:
            raise ValueError(
                f"Scalar tensor must contain a single item, {numel} given."
            )

        return float(scalar.cpu().numpy().item())
    elif isinstance(scalar, ndarray):
        numel = scalar.size
        if numel != 1:
            raise ValueError(
                f"Scalar ndarray must contain a single item, {numel} given."
            )
        return float(scalar.item())

    return float(scalar)


class InMemoryLogger:
    def __init__(self) -> None:
        self._log_buffer: "OrderedDict[int, Dict[str, float]]" = OrderedDict()
        logger.info("Logging metrics in-memory")

    @property
    def log_buffer(self) -> Dict[int, Dict[str, float]]:
        return self._log_buffer

    def log_dict(self, payload: Mapping[str, Scalar], step: int) -> None:
        for k, v in payload.items():
            self.log(k, v, step)

    def log(self, name: str, data: Scalar, step: int) -> None:
        self._log_buffer.setdefault(step, {})[name] = scalar_to_float(data)
        self._log_buffer[step]["step"] = step
        self._log_buffer[step]["time"] = monotonic()

    def close(self) -> None:
        self._log_buffer.clear()


class MyTrainUnit:
    def __init__(self, module, optimizer, metric_logger, log_every_n_steps=1):
        self.module = module
        self.optimizer = optimizer
        self.loss_fn = torch.nn.CrossEntropyLoss()
        self.metric_logger = metric_logger
        self.log_every_n_steps = log_every_n_steps
        self.steps = 0

    def train_step(self, data):
        inputs, targets = data
        outputs = self.module(inputs)
        loss = self.loss_fn(outputs, targets)
        loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad()
        self.steps += 1
        if self.steps % self.log_every_n_steps == 0:
            self.metric_logger.log("loss", loss, self.steps)
        return loss, outputs


def train(unit, dataloader):
    for data in dataloader:
        unit.train_step(data)


if __name__ == "__main__":
    torch.manual_seed(0)
    module = torch.nn.Linear(6, 3)
    optimizer = torch.optim.SGD(module.parameters(), lr=0.1)
    metric_logger = InMemoryLogger()
    unit = MyTrainUnit(module, optimizer, metric_logger)
    dataloader = [(torch.randn(4, 6), torch.randint(0, 3, (4,))) for _ in range(3)]

    try:
        train(unit, dataloader)
        raised = None
    except RuntimeError as e:
        raised = str(e)

    assert raised is not None and "Can't call numpy() on Tensor that requires grad" in raised, raised
    assert len(metric_logger.log_buffer) == 0
    print("evidence holds: logging the training loss raised:", raised)
