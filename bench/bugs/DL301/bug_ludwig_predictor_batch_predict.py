# source: https://github.com/ludwig-ai/ludwig/pull/1739
# category: DL301
# expect: flag 59, 61, 71
# evidence: Predictor.batch_predict() sets the model to eval mode and, batch after batch, accumulates the model's prediction tensors built with grad enabled: every batch's logits carry a grad_fn, and the per-batch lists keep all those graphs alive until the final concatenation
from collections import defaultdict

import numpy as np
import torch
import torch.nn as nn


class ECD(nn.Module):
    """Encoder-Combiner-Decoder: one numeric input feature, one category output feature."""

    def __init__(self, in_dim=6, hidden=16, n_class=4):
        super().__init__()
        self.input_features = {"x": "x_proc"}
        self.output_features = {"label": n_class}
        self.encoder = nn.Sequential(nn.Linear(in_dim, hidden), nn.ReLU())
        self.combiner = nn.Linear(hidden, hidden)
        self.decoder = nn.Linear(hidden, n_class)

    def forward(self, inputs):
        h = self.combiner(self.encoder(inputs["x"]))
        return {"label::logits": self.decoder(h)}

    def predict(self, inputs):
        outputs = self(inputs)
        logits = outputs["label::logits"]
        probabilities = torch.softmax(logits, dim=-1)
        return {"label": {"predictions": probabilities.argmax(-1), "probabilities": probabilities,
                          "logits": logits}}


class Batcher(object):
    def __init__(self, dataset, batch_size):
        self.dataset, self.batch_size, self.step = dataset, batch_size, 0

    @property
    def last_batch(self):
        return self.step * self.batch_size >= len(self.dataset["x_proc"])

    def next_batch(self):
        sl = slice(self.step * self.batch_size, (self.step + 1) * self.batch_size)
        self.step += 1
        return {k: v[sl] for k, v in self.dataset.items()}


class Predictor(object):
    def __init__(self, model, batch_size=4, device="cpu"):
        self.model = model
        self._batch_size = batch_size
        self.device = device

    def batch_predict(self, dataset, dataset_name=None):
        self.model.eval()  # set model to eval mode
        batcher = Batcher(dataset, self._batch_size)
        predictions = defaultdict(list)
        while not batcher.last_batch:
            batch = batcher.next_batch()
            preds = self._predict(self.model, batch)
            self._accumulate_preds(preds, predictions)

        # consolidate predictions from each batch to a single tensor
        for key, pred_value_list in predictions.items():
            predictions[key] = torch.cat(pred_value_list, dim=0).clone().detach().cpu().numpy()
        return predictions

    def _predict(self, model, batch):
        inputs = {feat: torch.from_numpy(batch[proc]).to(self.device) for feat, proc in model.input_features.items()}
        return model.predict(inputs)

    def _accumulate_preds(self, preds, predictions):
        # accumulate predictions from batch for each output feature
        for of_name, of_preds in preds.items():
            for pred_name, pred_values in of_preds.items():
                key = f"{of_name}_{pred_name}"
                predictions[key].append(pred_values)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = ECD()
    dataset = {"x_proc": np.random.RandomState(0).randn(12, 6).astype(np.float32)}
    logits = []
    model.decoder.register_forward_hook(lambda mod, inp, out: logits.append(out))
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        predictions = Predictor(model).batch_predict(dataset)
    assert not model.training and predictions["label_probabilities"].shape == (12, 4)
    assert len(logits) == 3 and all(t.grad_fn is not None for t in logits)
    assert sum(saved) > 0
    grads = torch.autograd.grad(logits[0].sum(), model.encoder[0].weight)
    assert grads[0].abs().sum() > 0
    print("evidence holds: the logits of all %d predicted batches carry grad_fns reaching the encoder; %d bytes saved"
          % (len(logits), sum(saved)))
