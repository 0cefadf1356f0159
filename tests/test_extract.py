"""What the reproduction spec carries from the user's file (`verify/extract.py`):
the models that build a layer, module-level values the code reads, the loop
that calls a step function, the call site that feeds the target."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from detachlint.engine import lint_source
from detachlint.registry import load_rules
from detachlint.finding import Finding
from detachlint.verify.extract import build_spec

RULES = load_rules()

VQ_AUTOENCODER = '''
import torch
from torch import nn


class Codebook(nn.Module):
    def __init__(self, dim, size, learnable=False):
        super().__init__()
        embed = torch.randn(size, dim)
        if learnable:
            self.embed = nn.Parameter(embed)
        else:
            self.register_buffer("embed", embed)

    def forward(self, x):
        dist = torch.cdist(x, self.embed)
        indices = dist.argmin(dim=-1)
        return self.embed[indices], indices


class VectorQuantize(nn.Module):
    def __init__(self, dim, size, learnable=False):
        super().__init__()
        self._codebook = Codebook(dim, size, learnable=learnable)

    def forward(self, x):
        quantize, indices = self._codebook(x)
        quantize = x + (quantize - x).detach()
        return quantize, indices


class AutoEncoder(nn.Module):
    def __init__(self, dim=8, size=16):
        super().__init__()
        self.enc = nn.Linear(dim, dim)
        self.vq = VectorQuantize(dim, size, learnable=True)
        self.dec = nn.Linear(dim, dim)

    def forward(self, x):
        quantized, _ = self.vq(self.enc(x))
        return self.dec(quantized)
'''

STEP_IN_LOOP = '''
import torch
from torch import nn


class Regressor(nn.Module):
    def __init__(self, n_in=8):
        super().__init__()
        self.fc = nn.Linear(n_in, 1)

    def forward(self, x):
        return self.fc(x).squeeze(-1)


def train_step(model, opt, x, y):
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    return loss.item()


def fit(model, batches, lr=0.1):
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    total = 0.0
    for x, y in batches:
        total += train_step(model, opt, x, y)
    return total / len(batches)
'''


def _write(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source).lstrip("\n"), encoding="utf-8")
    return path


def _specs(tmp_path: Path, source: str, code: str, name: str = "user.py"):
    path = _write(tmp_path, name, source)
    text = path.read_text(encoding="utf-8")
    findings = lint_source(path.read_bytes(), str(path), [RULES[code]]).findings
    assert findings, f"no {code} finding"
    return [(f, build_spec(f, text)) for f in findings]


def _spec_at(tmp_path: Path, source: str, code: str, marker: str, name: str = "user.py") -> dict:
    """The spec of a finding of `code` on the line holding `marker` (the rule's
    own heuristics aside: what is tested here is what the spec carries)."""
    path = _write(tmp_path, name, source)
    text = path.read_text(encoding="utf-8")
    line = next(n for n, l in enumerate(text.splitlines(), 1) if marker in l)
    column = text.splitlines()[line - 1].index(marker) + 1
    finding = Finding(path=str(path), line=line, column=column, code=code, name=code, end_line=line, end_column=column + len(marker), message="")
    return build_spec(finding, text)


def _carried(spec) -> str:
    return "".join(block["text"] for block in spec["blocks"])


def test_member_layer_carries_the_models_that_build_it(tmp_path):
    ((finding, spec),) = _specs(tmp_path, VQ_AUTOENCODER, "DL201")
    assert spec["target"] == {"kind": "method", "class": "VectorQuantize", "function": "forward"}
    text = _carried(spec)
    assert "class AutoEncoder(nn.Module):" in text and "class Codebook(nn.Module):" in text


def test_module_level_values_safe_to_build_are_carried(tmp_path):
    source = '''
        import argparse
        import torch
        from torch import nn

        parser = argparse.ArgumentParser()
        parser.add_argument("--lr", type=float, default=1e-3)
        args = parser.parse_args()


        class Critic(nn.Module):
            def __init__(self, n=4):
                super().__init__()
                self.fc = nn.Linear(n, 1)

            def forward(self, x):
                return self.fc(x)


        criterion = nn.MSELoss()
        critic = Critic(4)
        pretrained = torch.load("critic.pt")


        def update(batch, target):
            value = critic(batch)
            loss = criterion(value, target) * args.lr
            loss.backward()
            return pretrained, loss.item()


        def report(x):
            return x.detach().cpu().numpy()
    '''
    spec = _spec_at(tmp_path, source, "DL603", "value = critic(batch)")
    assert spec["target"] == {"kind": "function", "function": "update"}
    text = _carried(spec)
    # Constructors of torch and of the file's own classes run as written.
    assert "criterion = nn.MSELoss()" in text and "critic = Critic(4)" in text
    # A file read or the worker's command line never does.
    assert "torch.load" not in text and "parse_args" not in text
    assert set(spec["unavailable"]) == {"args", "pretrained"}


def test_parser_read_with_its_own_argument_list_is_carried(tmp_path):
    source = '''
        import argparse
        import torch
        from torch import nn

        parser = argparse.ArgumentParser(description="toy")
        parser.add_argument("--lr", type=float, default=0.01)
        args = parser.parse_args([])

        model = nn.Linear(4, 2)
        optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)


        def train(batches):
            for x, y in batches:
                loss = nn.functional.mse_loss(model(x), y)
                loss.backward()
                optimizer.step()
    '''
    spec = _spec_at(tmp_path, source, "DL601", "optimizer.step()")
    text = _carried(spec)
    assert 'parser.add_argument("--lr", type=float, default=0.01)' in text
    assert "args = parser.parse_args([])" in text and "optimizer = torch.optim.SGD(" in text
    assert spec["unavailable"] == {}


def test_step_function_called_in_a_loop_targets_the_loop(tmp_path):
    ((finding, spec),) = _specs(tmp_path, STEP_IN_LOOP, "DL601")
    assert "called in a loop on line 24" in finding.message
    assert spec["target"] == {"kind": "function", "function": "fit"}
    assert "def train_step(model, opt, x, y):" in _carried(spec)
    assert spec["line"] == finding.line == 17


def test_call_site_fed_by_the_model_wins_over_fresh_tensors(tmp_path):
    source = '''
        import torch
        from torch import nn


        class TinyDetector(nn.Module):
            def __init__(self):
                super().__init__()
                self.conv = nn.Conv2d(3, 5, 3, padding=1)

            def forward(self, x):
                return self.conv(x)


        def plot_maps(*arrays):
            panels = []
            for array in arrays:
                panels.append(array.cpu().numpy())
            return panels


        def visualize(model, img):
            out = model(img.unsqueeze(0))
            maps = [out[0, c] for c in range(out.shape[1])]
            return plot_maps(*maps)


        if __name__ == "__main__":
            model = TinyDetector()
            img = torch.rand(3, 16, 16)
            visualize(model, img)
            panels = plot_maps(torch.rand(4, 4), torch.rand(4, 4))
    '''
    spec = _spec_at(tmp_path, source, "DL402", "array.cpu().numpy()")
    assert spec["call_site"]["call"] == "visualize(model, img)"
    assert "model = TinyDetector()" in "".join(b["text"] for b in spec["blocks"] if b.get("call_site"))


def test_call_site_keeps_calls_that_change_the_arguments(tmp_path):
    source = '''
        import torch
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self, n_in=100, n_out=10):
                super().__init__()
                self.layer = nn.Linear(n_in, n_out)

            def forward(self, x):
                return self.layer(x)


        def prune_inputs(layer, keep):
            layer.weight.data = layer.weight.data[:, :keep]
            layer.in_features = keep


        def finetune_step(model, inputs, target, criterion, keep):
            out = model(inputs[:, :keep])
            loss = criterion(out, target)
            loss.backward()
            return loss


        if __name__ == "__main__":
            torch.manual_seed(0)
            model = Net()
            inputs = torch.randn(8, 100)
            target = torch.randn(8, 10)
            prune_inputs(model.layer, 90)
            print(model)
            finetune_step(model, inputs, target, nn.MSELoss(), 90)

            # A fresh model: what the earlier calls did to the old one is not its input.
            prune_inputs(model.layer, 80)
            model = Net()
            finetune_step(model, inputs, target, nn.MSELoss(), 100)
    '''
    spec = _spec_at(tmp_path, source, "DL102", "loss.backward()")
    site = [b["text"].strip() for b in spec["blocks"] if b.get("call_site")]
    assert site == ["model = Net()", "inputs = torch.randn(8, 100)", "target = torch.randn(8, 10)", "prune_inputs(model.layer, 90)"]
    assert spec["call_site"]["call"] == "finetune_step(model, inputs, target, nn.MSELoss(), 90)"
    import ast

    from detachlint.verify import extract

    tree = ast.parse(textwrap.dedent(source))
    sites = []
    for call in [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "finetune_step"]:
        before = [s for s in extract._simple_statements(tree.body) if s.lineno < call.lineno]
        sites.append(extract._arguments_slice(before, call, extract._Index(tree), {"kind": "function", "function": "finetune_step"}))
    last = sites[-1]
    assert [ast.unparse(s) for s in last["statements"]][-1] == "model = Net()"
    assert "prune_inputs(model.layer, 80)" not in [ast.unparse(s) for s in last["statements"]]


def test_classes_and_functions_the_file_passes_in_are_carried(tmp_path):
    source = '''
        import torch
        import torch.nn as nn


        class MoCo(nn.Module):
            def __init__(self, base_encoder, dim=8, K=16):
                super().__init__()
                self.encoder_q = base_encoder(num_classes=dim)
                self.register_buffer("queue", torch.randn(dim, K))

            def forward(self, im_q):
                q = self.encoder_q(im_q)
                return q @ self.queue.detach()


        class ClassMemory:
            def __init__(self, num_classes, dim):
                self.centers = torch.zeros(num_classes, dim)


        def mlp_encoder(num_classes):
            return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Linear(32, num_classes))


        def train(model, batches, memory):
            for x in batches:
                loss = (model(x) - memory.centers[0].sum()).pow(2).mean()
                loss.backward()
                memory.centers = model.encoder_q(x).data[:5]


        if __name__ == "__main__":
            model = MoCo(mlp_encoder)
            train(model, [torch.randn(4, 12)], ClassMemory(5, 8))
    '''
    method = _spec_at(tmp_path, source, "DL204", "q @ self.queue.detach()")
    assert method["target"]["class"] == "MoCo"
    assert "def mlp_encoder(num_classes):" in _carried(method)
    assert "MoCo(mlp_encoder)" in method["hints"]["ctor_calls"]["MoCo"]
    function = _spec_at(tmp_path, source, "DL202", "memory.centers[0].sum()")
    assert function["target"] == {"kind": "function", "function": "train"}
    assert "class ClassMemory:" in _carried(function)


@pytest.fixture(scope="module")
def verifier(tmp_path_factory):
    pytest.importorskip("torch")
    from detachlint.verify import Verifier, VerifyOptions

    verifier = Verifier(VerifyOptions(timeout=10.0))
    verifier.start([str(tmp_path_factory.getbasetemp())])
    yield verifier
    verifier.close()


def _verify(verifier, tmp_path, source, code, name):
    path = _write(tmp_path, name, source)
    findings = lint_source(path.read_bytes(), str(path), [RULES[code]]).findings
    return verifier.verify(findings, lambda display: Path(display).read_text(encoding="utf-8"))


def test_member_layer_finding_confirmed_through_the_outer_model(verifier, tmp_path):
    (finding,) = _verify(verifier, tmp_path, VQ_AUTOENCODER, "DL201", "vq.py")
    verification = finding.verification
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert "`_codebook.embed` in `AutoEncoder`" in verification.evidence


def test_step_function_finding_confirmed_through_its_loop(verifier, tmp_path):
    (finding,) = _verify(verifier, tmp_path, STEP_IN_LOOP, "DL601", "step.py")
    verification = finding.verification
    assert (verification.status, verification.basis) == ("confirmed", "user-code"), verification.evidence
    assert "the second step applied" in verification.evidence


def test_call_in_a_loop_over_literal_values_takes_the_first_iteration(tmp_path):
    source = '''
        import copy
        import torch
        from torch import nn


        def train(model, batches, weight):
            for x, y in batches:
                loss = nn.functional.mse_loss(model(x), y) * weight
                loss.backward()


        if __name__ == "__main__":
            base = nn.Linear(4, 1)
            batches = [(torch.randn(8, 4), torch.randn(8, 1))]
            for weight, name in ((0.5, "half"), (1.0, "full")):
                model = copy.deepcopy(base)
                train(model, batches, weight)
    '''
    spec = _spec_at(tmp_path, source, "DL401", "loss.backward()")
    assert spec["call_site"]["call"] == "train(model, batches, weight)"
    site = [(b["line"], b["text"].strip()) for b in spec["blocks"] if b.get("call_site")]
    assert (15, "(weight, name) = (0.5, 'half')") in site
    assert site[-1] == (16, "model = copy.deepcopy(base)")
