# source: https://github.com/facebookresearch/detectron2/blob/main/detectron2/evaluation/evaluator.py
# category: DL301
# expect: clean
# evidence: inference_on_dataset runs its loop inside `with inference_context(model), torch.no_grad():`, so every output handed to the evaluator has no grad_fn and the model is restored to training mode afterwards.
import datetime
import logging
import time
from contextlib import contextmanager

import torch
import torch.nn as nn


class DatasetEvaluator:
    def reset(self):
        pass

    def process(self, inputs, outputs):
        pass

    def evaluate(self):
        pass


class ClassificationEvaluator(DatasetEvaluator):
    def reset(self):
        self._correct = 0
        self._total = 0
        self._outputs_have_graph = []

    def process(self, inputs, outputs):
        self._outputs_have_graph.append(outputs.requires_grad)
        pred = outputs.argmax(dim=1)
        self._correct += (pred == inputs["label"]).sum().item()
        self._total += pred.numel()

    def evaluate(self):
        return {"accuracy": self._correct / max(self._total, 1),
                "any_output_with_graph": any(self._outputs_have_graph)}


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Dropout(0.1))
        self.head = nn.Linear(16, 3)

    def forward(self, inputs):
        return self.head(self.backbone(inputs["image"]))


def inference_on_dataset(model, data_loader, evaluator):
    """
    Run model on the data_loader and evaluate the metrics with evaluator.
    The model will be used in eval mode.
    """
    num_devices = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
    logger = logging.getLogger(__name__)
    logger.info("Start inference on {} images".format(len(data_loader)))

    total = len(data_loader)  # inference data loader must have a fixed length
    evaluator.reset()

    num_warmup = min(5, total - 1)
    start_time = time.perf_counter()
    total_compute_time = 0
    with inference_context(model), torch.no_grad():
        for idx, inputs in enumerate(data_loader):
            if idx == num_warmup:
                start_time = time.perf_counter()
                total_compute_time = 0

            start_compute_time = time.perf_counter()
            outputs = model(inputs)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            total_compute_time += time.perf_counter() - start_compute_time
            evaluator.process(inputs, outputs)

            iters_after_start = idx + 1 - num_warmup * int(idx >= num_warmup)
            seconds_per_img = total_compute_time / iters_after_start
            if idx >= num_warmup * 2 or seconds_per_img > 5:
                total_seconds_per_img = (time.perf_counter() - start_time) / iters_after_start
                eta = datetime.timedelta(seconds=int(total_seconds_per_img * (total - idx - 1)))
                logger.info(
                    "Inference done {}/{}. {:.4f} s / img. ETA={}".format(
                        idx + 1, total, seconds_per_img, str(eta)
                    )
                )

    # Measure the time only for this worker (before the synchronization barrier)
    total_time = time.perf_counter() - start_time
    total_time_str = str(datetime.timedelta(seconds=total_time))
    logger.info(
        "Total inference time: {} ({:.6f} s / img per device, on {} devices)".format(
            total_time_str, total_time / max(total - num_warmup, 1), num_devices
        )
    )

    results = evaluator.evaluate()
    if results is None:
        results = {}
    return results


@contextmanager
def inference_context(model):
    """
    A context where the model is temporarily changed to eval mode,
    and restored to previous mode afterwards.
    """
    training_mode = model.training
    model.eval()
    yield
    model.train(training_mode)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Classifier()
    model.train()
    data_loader = [{"image": torch.randn(4, 12), "label": torch.randint(0, 3, (4,))} for _ in range(8)]

    results = inference_on_dataset(model, data_loader, ClassificationEvaluator())

    assert results["any_output_with_graph"] is False
    assert model.training is True
    assert torch.is_grad_enabled()
    print("evidence holds: none of the 8 inference outputs carried a graph; grad mode and train mode are restored afterwards")
