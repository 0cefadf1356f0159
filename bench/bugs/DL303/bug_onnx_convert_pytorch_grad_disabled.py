# source: https://github.com/huggingface/transformers/pull/13257
# category: DL303
# expect: flag 55, 92, 94
# evidence: convert_pytorch() switches grad mode off globally with torch.set_grad_enabled(False); a Trainer training step run afterwards in the same process computes its forward without autograd and loss.backward() raises.
from pathlib import Path
from typing import List, Tuple

import torch
import torch.nn as nn

torch.manual_seed(0)


class OnnxConfig:
    def __init__(self, inputs, outputs):
        self.inputs = inputs
        self.outputs = outputs


class PreTrainedModel(nn.Module):
    class _Config:
        return_dict = False

    def __init__(self, vocab=32, hidden=16, num_labels=2):
        super().__init__()
        self.config = self._Config()
        self.embeddings = nn.Embedding(vocab, hidden)
        self.classifier = nn.Linear(hidden, num_labels)

    def forward(self, input_ids, attention_mask=None, labels=None):
        logits = self.classifier(self.embeddings(input_ids).mean(1))
        loss = nn.functional.cross_entropy(logits, labels) if labels is not None else None
        return {"loss": loss, "logits": logits}


def export(model, args, f, input_names, output_names, dynamic_axes=None, do_constant_folding=True,
           use_external_data_format=False, enable_onnx_checker=True, opset_version=None):
    """Stand-in for torch.onnx.export (the onnx package is not installed): traces the model once."""
    model(*args[:-1], **args[-1]) if isinstance(args[-1], dict) else model(*args)


def ensure_model_and_config_inputs_match(model_inputs, config_inputs):
    matching = [name for name in config_inputs if name in model_inputs]
    return len(matching) == len(config_inputs), matching


def convert_pytorch(tokenizer, model: PreTrainedModel, config: OnnxConfig, opset: int, output: Path
                    ) -> Tuple[List[str], List[str]]:
    """
    Export a PyTorch backed pipeline to ONNX Intermediate Representation (IR
    """
    import torch

    print(f"Using framework PyTorch: {torch.__version__}")
    torch.set_grad_enabled(False)
    model.config.return_dict = True

    # Ensure inputs match
    model_inputs = tokenizer(["[UNK]"] * 4)
    inputs_match, ordered_onnx_inputs = ensure_model_and_config_inputs_match(model_inputs.keys(), config.inputs)

    if not inputs_match:
        raise ValueError("Model and config inputs doesn't match")

    # export can works with named args but the dict containing named args as to be last element of the args tuple
    export(
        model,
        (model_inputs,),
        f=output.as_posix(),
        input_names=ordered_onnx_inputs,
        output_names=config.outputs,
        do_constant_folding=True,
        opset_version=opset,
    )
    return ordered_onnx_inputs, config.outputs


def tokenizer(tokens):
    ids = torch.randint(0, 32, (1, len(tokens)))
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids)}


class Trainer:
    """The few lines of transformers.Trainer exercised by the failing Trainer tests."""

    def __init__(self, model, learning_rate=0.1):
        self.model = model
        self.optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)

    def training_step(self, model, inputs):
        model.train()
        outputs = model(**inputs)
        loss = outputs["loss"]
        loss.backward()
        return loss.detach()

    def train(self, batches):
        for inputs in batches:
            tr_loss_step = self.training_step(self.model, inputs)
            self.optimizer.step()
            self.model.zero_grad()
        return tr_loss_step


if __name__ == "__main__":
    # test_onnx runs first in the same pytest process ...
    onnx_model = PreTrainedModel()
    convert_pytorch(tokenizer, onnx_model, OnnxConfig(["input_ids", "attention_mask"], ["logits"]), 12,
                    Path("model.onnx"))
    # ... then the Trainer tests train a fresh model
    model = PreTrainedModel()
    batches = [dict(input_ids=torch.randint(0, 32, (4, 6)), labels=torch.randint(0, 2, (4,)))]
    try:
        Trainer(model).train(batches)
        raise AssertionError("training unexpectedly worked")
    except RuntimeError as e:
        msg = str(e)
    assert not torch.is_grad_enabled()
    assert "does not require grad" in msg, msg
    print("evidence holds: after convert_pytorch the Trainer step fails:", msg)
