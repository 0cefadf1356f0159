"""Config objects, scalars and module values the reproduction builds from the
user's program: an `args` from the file's argparse defaults, a `cmdl` read
only for its settings, a size argument, a numpy input, the constants of a
star import and a model the `__main__` block builds. Made-up settings are
named in the evidence and never decide a refutation.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest
from conftest import rule_codes

from detachlint.engine import lint_source
from detachlint.registry import load_rules
from detachlint.verify import Verifier, VerifyOptions
from detachlint.verify.extract import _parser_defaults

pytest.importorskip("torch")

RULES = load_rules()


@pytest.fixture(scope="module")
def verifier(tmp_path_factory):
    verifier = Verifier(VerifyOptions(timeout=10.0))
    verifier.start([str(tmp_path_factory.getbasetemp())])
    yield verifier
    verifier.close()


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    return path


def _verdicts(verifier, path: Path, code: str):
    """{line: verification} of the rule's findings in the file."""
    findings = lint_source(path.read_bytes(), str(path), [RULES[c] for c in rule_codes(code)]).findings
    assert findings, f"{code} found nothing"
    verified = verifier.verify(findings, lambda display: Path(display).read_text(encoding="utf-8"))
    return {f.line: f.verification for f in verified}


def _decided(verification, status="confirmed"):
    assert (verification.status, verification.basis) == (status, "user-code"), verification
    return verification.evidence


def test_parser_defaults_are_read_as_argparse_gives_them():
    tree = ast.parse(textwrap.dedent("""
        import argparse

        def main():
            parser = argparse.ArgumentParser()
            parser.add_argument("--batch-size", type=int, default=64)
            parser.add_argument("--lr", type=float, default="0.5")
            parser.add_argument("--no-cuda", action="store_true")
            parser.add_argument("--keep", action="store_false")
            parser.add_argument("--save", dest="save_dir", default="out")
            parser.add_argument("--seed", type=int)
            parser.add_argument("--size", default=compute())
            parser.add_argument("data")
            return parser.parse_args()
    """))
    assert _parser_defaults(tree) == {
        "batch_size": 64, "lr": 0.5, "no_cuda": False, "keep": True, "save_dir": "out", "seed": None,
    }


ARGS_TRAIN = """
    import argparse

    import torch
    from torch import nn
    from torch.autograd import Variable


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 4)

        def forward(self, x):
            return self.fc(x)


    def make_noise(args, model):
        noise = torch.randn(args.noise_batch, args.noise_dim)
        if args.scale_noise:
            noise = noise * args.noise_scale
        return Variable(noise.detach(), requires_grad=True)


    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--noise-batch", type=int, default=3)
        parser.add_argument("--noise-dim", type=int, default=8)
        parser.add_argument("--scale-noise", action="store_true")
        parser.add_argument("--noise-scale", type=float, default=0.5)
        args = parser.parse_args()
        make_noise(args, Net())
"""


def test_args_come_from_the_files_parser_and_the_evidence_says_so(verifier, tmp_path):
    path = _write(tmp_path / "train_noise.py", ARGS_TRAIN)
    (verification,) = _verdicts(verifier, path, "DL701").values()
    evidence = _decided(verification)
    assert "`args.noise_batch`" in evidence and "argument defaults of the file's parser" in evidence
    assert "made-up" not in evidence


CMDL_TRAINER = """
    import torch
    from torch import nn
    from torch.autograd import Variable


    class QNet(nn.Module):
        def __init__(self, actions=4):
            super().__init__()
            self.fc = nn.Linear(8, actions)

        def forward(self, x):
            return self.fc(x)


    class PolicyImprovement(object):
        def __init__(self, policy, cmdl):
            self.policy = policy
            self.lr = cmdl.lr
            self.gamma = cmdl.gamma
            self.device = "cuda" if cmdl.cuda else "cpu"
            self.optimizer = torch.optim.SGD(self.policy.parameters(), lr=self.lr)

        def targets(self, batch_sz, rewards):
            q_target = Variable(torch.zeros(batch_sz, device=self.device))
            return q_target * self.gamma + rewards
"""


def test_a_settings_only_argument_is_a_config_and_a_size_is_an_int(verifier, tmp_path):
    path = _write(tmp_path / "dqn_update.py", CMDL_TRAINER)
    (verification,) = _verdicts(verifier, path, "DL701").values()
    evidence = _decided(verification)
    # Made up, and said so: `cmdl.cuda` is off (the run is on the CPU).
    assert "made-up values for `cmdl.lr`, `cmdl.gamma`, `cmdl.cuda`" in evidence


NUMPY_INPUT = """
    import numpy as np
    import torch
    from torch.autograd import Variable


    def objective(perturb):
        perturb = torch.from_numpy(perturb)
        perturb = perturb.type(torch.FloatTensor)
        perturb_var = Variable(perturb, requires_grad=True)
        return (perturb_var ** 2).sum()
"""


def test_an_argument_the_code_reads_as_a_numpy_array_is_one(verifier, tmp_path):
    path = _write(tmp_path / "objective.py", NUMPY_INPUT)
    (verification,) = _verdicts(verifier, path, "DL701").values()
    assert "expected np.ndarray" not in verification.evidence
    _decided(verification)


CONSTANTS = """
    latent_dim = 6
    batch_size = 3
"""

STAR_IMPORT = """
    import torch
    from torch.autograd import Variable

    from constants import *


    def sample_noise():
        return Variable(torch.randn(batch_size, latent_dim), requires_grad=True)
"""


def test_the_constants_of_a_star_import_are_the_programs(verifier, tmp_path):
    _write(tmp_path / "constants.py", CONSTANTS)
    path = _write(tmp_path / "sample.py", STAR_IMPORT)
    (verification,) = _verdicts(verifier, path, "DL701").values()
    evidence = _decided(verification)
    assert "stubbed" not in evidence and "Missing" not in evidence


MAIN_GLOBALS = """
    import torch
    from torch import nn
    from torch.autograd import Variable


    class VAE(nn.Module):
        def __init__(self, latent=6):
            super().__init__()
            self.dec = nn.Linear(latent, 8)

        def decode(self, z):
            return self.dec(z)


    def sample():
        z = Variable(model.decode(torch.randn(2, 6)))
        return z


    if __name__ == "__main__":
        model = VAE()
        for epoch in range(3):
            sample()
"""


def test_a_model_the_main_block_builds_is_the_programs(verifier, tmp_path):
    path = _write(tmp_path / "vae_sample.py", MAIN_GLOBALS)
    (verification,) = _verdicts(verifier, path, "DL701").values()
    evidence = _decided(verification)
    assert "stand-in" not in evidence and "stubbed" not in evidence


DATA_GLOBAL = """
    import torch
    from torch import nn
    from torch.autograd import Variable
    from torchvision import datasets, transforms


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(1, 4, 5)
            self.fc = nn.Linear(4 * 24 * 24, 10)

        def forward(self, x):
            return self.fc(torch.relu(self.conv(x)).flatten(1))


    def test(epoch):
        model.eval()
        for data, target in test_loader:
            data = Variable(data, volatile=True)
            output = model(data)
            print(epoch, output.argmax(1).eq(target).sum())


    if __name__ == "__main__":
        test_loader = torch.utils.data.DataLoader(
            datasets.MNIST("../data", train=False, transform=transforms.ToTensor()), batch_size=64)
        model = Net()
        for epoch in range(1, 3):
            test(epoch)
"""


def test_a_data_source_the_main_block_reads_gets_synthesized_batches_as_input(verifier, tmp_path):
    path = _write(tmp_path / "mnist_eval.py", DATA_GLOBAL)
    verification = _verdicts(verifier, path, "DL701")[20]
    evidence = _decided(verification)
    assert "with synthesized batches for the data source `test_loader`" in evidence
    assert "stand-in" not in evidence


CONFIG_CLASS = """
    from dataclasses import dataclass

    import torch
    from torch.autograd import Variable


    @dataclass
    class NoiseConfig:
        batch: int = 3
        noise_dim: int = 8
        scale: float = 0.5


    def make_noise(cfg):
        noise = torch.randn(cfg.batch, cfg.noise_dim) * cfg.scale
        return Variable(noise.detach(), requires_grad=True)
"""


def test_a_config_the_files_own_class_covers_is_built_from_its_defaults(verifier, tmp_path):
    path = _write(tmp_path / "noise.py", CONFIG_CLASS)
    (verification,) = _verdicts(verifier, path, "DL701").values()
    evidence = _decided(verification)
    assert "`cfg` built as the file's `NoiseConfig()` with its defaults" in evidence
    assert "made-up" not in evidence


HELPERS = """
    import torch
    import detachlint_absent_plotting.images as plotting


    def noise_like(x, scale=0.1):
        return torch.randn_like(x) * scale


    def noise_shown(x):
        plotting.show(x)
        return torch.randn_like(x)
"""

PERTURB = """
    import torch
    from torch.autograd import Variable

    from helpers import noise_like, noise_shown


    def perturb(feature):
        noise = noise_like(feature.float())
        return Variable(noise, requires_grad=True)


    def perturb_shown(feature):
        noise = noise_shown(feature.float())
        return Variable(noise, requires_grad=True)
"""


def test_a_project_module_importing_a_package_not_installed_still_runs(verifier, tmp_path):
    _write(tmp_path / "helpers.py", HELPERS)
    path = _write(tmp_path / "perturb.py", PERTURB)
    verdicts = _verdicts(verifier, path, "DL701")
    _decided(verdicts[9])
    # The code that calls into the absent package rests on a stub, and says so.
    shown = verdicts[14]
    assert shown.status != "confirmed" and "detachlint_absent_plotting" in shown.evidence, shown


FROZEN_TEACHER = """
    import torch
    from torch import nn
    from torch.autograd import Variable


    class Teacher(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(6, 4)

        def forward(self, x):
            return self.fc(x)


    def soft_targets():
        return Variable(teacher(torch.randn(2, 6)))


    if __name__ == "__main__":
        teacher = Teacher()
        teacher.requires_grad_(False)
        for step in range(3):
            soft_targets()
"""


def test_what_the_main_block_does_to_its_model_before_the_call_is_carried(verifier, tmp_path):
    path = _write(tmp_path / "distill.py", FROZEN_TEACHER)
    (verification,) = _verdicts(verifier, path, "DL701").values()
    # Frozen as the program freezes it: the linter claims no cut (a plain
    # deprecation, DL702's), and the run finds the wrapper changed nothing.
    _decided(verification, "confirmed")
