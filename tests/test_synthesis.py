"""Input synthesis read off the user's layers and criteria (`verify/runtime/synthesis.py`)."""

import ast
import textwrap

import pytest

torch = pytest.importorskip("torch")

from detachlint.verify.runtime.synthesis import (  # noqa: E402
    Chain,
    Plan,
    Synth,
    chain_input,
    name_matcher,
    product_spec,
    target_spec,
)
from detachlint.verify.runtime.user_code import UserModule  # noqa: E402

MODELS = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class LeNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, num_classes)

    def forward(self, x):
        batch = x.size(0)
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = x.view(-1, 16 * 5 * 5)
        return self.fc2(F.relu(self.fc1(x)))


class MnistNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(1, 4, 3), nn.ReLU(), nn.Flatten())
        self.head = nn.Linear(4 * 26 * 26, 10)

    def forward(self, x):
        return self.head(self.features(x))


class PytorchExampleNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


class AtariQNet(nn.Module):
    def __init__(self, n_actions):
        super().__init__()
        self.convs = nn.Sequential(
            nn.Conv2d(4, 32, 8, stride=4), nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2), nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1), nn.ReLU(),
        )
        self.fc = nn.Linear(64 * 7 * 7, n_actions)

    def forward(self, obs):
        h = self.convs(obs / 255.0)
        return self.fc(h.view(h.size(0), -1))


class PaddedEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                                  nn.Conv2d(8, 16, 3, stride=2, padding=1, dilation=2))
        self.out = nn.Linear(16 * 7 * 7, 2)  # 32 -> 16 -> 7

    def forward(self, x):
        x = self.body(x)
        return self.out(x.reshape(x.shape[0], -1))


class FullyConv(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 5))

    def forward(self, x):
        return self.net(x)


class AudioNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv1d(2, 4, 5, stride=2)
        self.fc = nn.Linear(4 * 10, 3)

    def forward(self, wave):
        return self.fc(torch.flatten(self.conv(wave), 1))


class MyLinear(nn.Module):
    def __init__(self, in_units, units):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(in_units, units))
        self.bias = nn.Parameter(torch.randn(units))

    def forward(self, X):
        return torch.matmul(X, self.weight.data) + self.bias.data


class Quantizer(nn.Module):
    def __init__(self, num_codes, code_dim):
        super().__init__()
        self.codebook = nn.Embedding(num_codes, code_dim)

    def forward(self, z_e):
        distances = torch.cdist(z_e, self.codebook.weight)
        return self.codebook(distances.argmin(dim=-1))


def train_classifier(model, images, labels, optimizer):
    logits = model(images)
    loss = F.cross_entropy(logits, labels)
    loss.backward()


def train_multilabel(model, features, targets):
    criterion = nn.BCEWithLogitsLoss()
    out = model(features)
    return criterion(out, targets)
'''


@pytest.fixture(scope="module")
def user():
    module = UserModule({"path": "models.py", "blocks": [{"line": 1, "text": MODELS}]})
    yield module
    module.close()


def _input(user, name, *args):
    model = user.ns[name](*args)
    spec = chain_input(Chain(user.class_ast_of).of_module(model), 32)
    assert spec is not None, name
    # The synthesized input runs through the user's own model.
    model(spec.make())
    return spec


@pytest.mark.parametrize(
    "name, args, shape",
    [
        ("LeNet", (), (2, 3, 32, 32)),  # two 5x5 convs and 2x2 pools down to 16*5*5
        ("MnistNet", (), (2, 1, 28, 28)),  # Linear(4*26*26) after a 3x3 conv on one channel
        ("PytorchExampleNet", (), (2, 1, 28, 28)),  # F.max_pool2d and torch.flatten in forward
        ("AtariQNet", (6,), (2, 4, 84, 84)),  # strides 4, 2, 1 down to 7x7
        ("PaddedEncoder", (), (2, 3, 32, 32)),  # padding, dilation, BatchNorm, reshape(x.shape[0], -1)
        ("AudioNet", (), (2, 2, 23)),  # Conv1d: (23 - 5) // 2 + 1 = 10
    ],
)
def test_layer_arithmetic_fixes_the_input(user, name, args, shape):
    spec = _input(user, name, *args)
    assert (spec.kind, spec.shape) == ("float", shape)


def test_an_adaptive_pool_leaves_the_plans_side(user):
    spec = _input(user, "FullyConv")
    assert spec.shape == (2, 3, 32, 32)


def test_a_product_with_a_weight_fixes_the_last_dimension(user):
    linear = user.ns["MyLinear"](64, 8)
    forward = user.find_function("forward", "MyLinear")
    spec = product_spec(forward, name_matcher("X"), {"self": linear})
    assert spec.shape == (2, 64)
    quantizer = user.ns["Quantizer"](128, 16)
    forward = user.find_function("forward", "Quantizer")
    spec = product_spec(forward, name_matcher("z_e"), {"self": quantizer})
    assert spec.shape == (2, 16)
    quantizer(spec.make())


def test_cross_entropy_targets_are_class_indices_below_the_output_width(user):
    model = user.ns["LeNet"](3)
    function = user.find_function("train_classifier")
    spec = target_spec(function, name_matcher("labels"), {"model": model}, Plan())
    assert (spec.kind, spec.shape, spec.high) == ("long", (2,), 3)


def test_bce_targets_are_shaped_like_the_prediction(user):
    model = user.ns["AtariQNet"](5)
    function = user.find_function("train_multilabel")
    spec = target_spec(function, name_matcher("targets"), {"model": model}, Plan())
    assert (spec.kind, spec.shape) == ("labels_float", (2, 5))
    values = spec.make()
    assert set(values.unique().tolist()) <= {0.0, 1.0}


def test_synth_builds_arguments_the_users_function_accepts(user):
    synth = Synth(user, Plan(), {"param_classes": {"model": "AtariQNet"}})
    function = user.ns["train_multilabel"]
    import inspect

    node = user.find_function("train_multilabel")
    args, kwargs = synth.arguments(inspect.signature(function), node, {}, skip_self=False)
    # The model is one of the file's classes; the features and targets fit it.
    assert type(kwargs["model"]).__name__ == "AtariQNet"
    assert kwargs["features"].shape == (2, 4, 84, 84) and kwargs["targets"].shape == (2, 4)
    loss = function(*args, **kwargs)
    assert loss.requires_grad


def test_a_value_whose_methods_one_class_has_is_built_from_that_class():
    source = textwrap.dedent(
        '''
        import torch

        class Meter:
            def __init__(self, n):
                self.n = n
                self.total = 0.0

            def tic(self):
                pass

            def update(self, value):
                self.total += float(value)

        def evaluate(model, meter, x):
            meter.tic()
            meter.update(model(x).sum())
        '''
    )
    module = UserModule({"path": "meter.py", "blocks": [{"line": 1, "text": source}]})
    try:
        synth = Synth(module, Plan(), {})
        node = module.find_function("evaluate")
        assert synth.role("meter", node) == "instance"
        import inspect

        value = synth.value_for(inspect.Parameter("meter", inspect.Parameter.POSITIONAL_OR_KEYWORD), node, {}, False)
        assert type(value).__name__ == "Meter"
    finally:
        module.close()


def test_reading_the_size_does_not_end_the_chain(user):
    forward = user.find_function("forward", "LeNet")
    ops = Chain(user.class_ast_of).of_function(forward, name_matcher("x"), {"self": user.ns["LeNet"]()})
    assert ops[0][0] == "layer" and type(ops[0][1]).__name__ == "Conv2d"
    assert ast.dump(forward).count("size") >= 1


TRAINING = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class TwoHeadNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.classes = nn.Linear(8, 5)
        self.direction = nn.Linear(8, 4)

    def forward(self, x):
        h = self.features(x)
        return self.classes(h), self.direction(h)


class SegNet(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.head = nn.Conv2d(8, classes, 1)

    def forward(self, data):
        return self.head(F.relu(self.conv(data["occupancy"])))

    def compute_loss(self, scores, data):
        return F.cross_entropy(scores, data["label"])


def my_loss(pred_classes, pred_direc, points, mode):
    return F.mse_loss(pred_direc, points) + F.cross_entropy(pred_classes, mode)


def train(net, loader):
    loss_fn = my_loss
    for data in loader:
        images, points, mode = data["image"], data["points"], data["mode"]
        pred_classes, pred_direc = net(images)
        loss = loss_fn(pred_classes, pred_direc, points, mode)
        loss.backward()


def train_seg(model, dataset):
    for data in dataset:
        scores = model(data)
        model.compute_loss(scores, data).backward()


def sinusoid(nb_p, dim, E):
    for p in range(nb_p):
        for j in range(dim - 1):
            E[p, j] = p / 10000 ** (j / dim)


class Trainer:
    def __init__(self, data_loader, config):
        self.data_loader = data_loader
        self.model = TwoHeadNet()

    def train(self):
        data_iter = iter(self.data_loader)
        images, _ = next(data_iter)
        return self.model(images)
'''


@pytest.fixture(scope="module")
def training():
    module = UserModule({"path": "training.py", "blocks": [{"line": 1, "text": TRAINING}]})
    yield module
    module.close()


def _arguments(module, name, hints=None, class_name=None):
    import inspect

    synth = Synth(module, Plan(), hints or {})
    function = module.ns[name]
    node = module.find_function(name)
    return synth, synth.arguments(inspect.signature(function), node, {}, skip_self=False)


@pytest.mark.filterwarnings("ignore:Using a target size")
def test_targets_come_from_the_criterion_in_a_function_the_value_is_handed_to(training):
    _, (args, kwargs) = _arguments(training, "train", {"param_classes": {"net": "TwoHeadNet"}})
    batch = kwargs["loader"][0]
    # `mode` reaches F.cross_entropy through `loss_fn = my_loss`: class indices;
    # `points` reaches F.mse_loss: a column that broadcasts against the prediction.
    assert batch["mode"].dtype == torch.long and batch["mode"].shape == (2,)
    assert batch["points"].shape == (2, 1)
    assert batch["image"].shape[:2] == (2, 3)
    training.ns["train"](*args, **kwargs)


def test_dict_batches_get_the_keys_the_models_own_code_reads(training):
    _, (args, kwargs) = _arguments(training, "train_seg", {"param_classes": {"model": "SegNet"}})
    batch = kwargs["dataset"][0]
    assert batch["occupancy"].shape == (2, 1, 32, 32)
    # A segmentation head: one class index per pixel, below its channel count.
    assert batch["label"].dtype == torch.long and batch["label"].shape == (2, 32, 32)
    assert int(batch["label"].max()) < 3
    training.ns["train_seg"](*args, **kwargs)


def test_a_name_the_code_counts_with_is_an_integer(training):
    synth = Synth(training, Plan(), {})
    node = training.find_function("sinusoid")
    assert synth.role("nb_p", node) == "int" and synth.role("dim", node) == "int"


def test_a_loader_given_to_a_constructor_is_shaped_for_the_method_that_reads_it(training):
    synth = Synth(training, Plan(), {})
    trainer = synth.construct(training.ns["Trainer"])
    images, _ = trainer.data_loader[0]
    assert images.shape[:2] == (2, 3) and images.dim() == 4
    classes, direction = trainer.train()
    assert classes.shape == (2, 5) and direction.shape == (2, 4)


def test_a_type_hint_decides_the_kind_of_an_argument():
    source = textwrap.dedent(
        '''
        from torch import nn

        class Wide(nn.Linear):
            pass
        '''
    )
    module = UserModule({"path": "wide.py", "blocks": [{"line": 1, "text": source}]})
    try:
        # nn.Linear's `out_features: int` is no file name, though the word `out` says so.
        layer = Synth(module, Plan(), {}).construct(module.ns["Wide"])
        assert isinstance(layer.out_features, int) and isinstance(layer.in_features, int)
    finally:
        module.close()


def test_a_config_handed_to_a_helper_is_a_config_and_its_sections_nest():
    source = textwrap.dedent(
        '''
        def loss_weights(phase, config_file):
            return {"atac": config_file.weight_atac, "rna": config_file.weight_rna}

        def train(model, config_file, settings):
            weights = loss_weights("warmup", config_file)
            width = settings["data_specs"]["width"]
            return weights, width
        '''
    )
    module = UserModule({"path": "cfg.py", "blocks": [{"line": 1, "text": source}]})
    try:
        synth = Synth(module, Plan(), {})
        node = module.find_function("train")
        assert synth.role("config_file", node) == "config"
        import inspect

        config = synth.value_for(inspect.Parameter("settings", inspect.Parameter.POSITIONAL_OR_KEYWORD), node, {}, False)
        assert isinstance(config["data_specs"]["width"], int)
    finally:
        module.close()


def test_a_callable_argument_is_the_files_own_function_that_accepts_its_calls():
    source = textwrap.dedent(
        '''
        import torch
        from torch import nn

        def mlp_encoder(num_classes):
            return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, num_classes))

        class MoCo(nn.Module):
            def __init__(self, base_encoder, dim=8):
                super().__init__()
                self.encoder_q = base_encoder(num_classes=dim)
                self.encoder_k = base_encoder(num_classes=dim)
                for param_q, param_k in zip(self.encoder_q.parameters(), self.encoder_k.parameters()):
                    param_k.data.copy_(param_q.data)

            def forward(self, im_q):
                return self.encoder_q.forward(im_q)
        '''
    )
    module = UserModule({"path": "moco.py", "blocks": [{"line": 1, "text": source}]})
    try:
        synth = Synth(module, Plan(), {})
        moco = synth.construct(module.ns["MoCo"])
        assert isinstance(moco.encoder_q, torch.nn.Sequential) and not synth.stand_ins
        # `self.encoder_q.forward(x)` is a call of the module: its first Linear sizes the input.
        import inspect

        forward = module.find_function("forward", "MoCo")
        args, kwargs = synth.arguments(inspect.signature(moco.forward), forward, {"self": moco}, skip_self=False)
        assert kwargs["im_q"].shape == (2, 6)
    finally:
        module.close()
