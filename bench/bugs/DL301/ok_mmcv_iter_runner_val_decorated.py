# source: https://github.com/open-mmlab/mmcv/pull/835
# category: DL301
# expect: clean
# evidence: IterBasedRunner.val() is decorated with @torch.no_grad(), so the val_step outputs collected during the ('val', n) workflow phases carry no grad_fn, while the ('train', n) phases still update the weights.
import torch
import torch.nn as nn
import torch.nn.functional as F


class IterLoader:

    def __init__(self, dataloader):
        self._dataloader = dataloader
        self.iter_loader = iter(self._dataloader)
        self._epoch = 0

    @property
    def epoch(self):
        return self._epoch

    def __next__(self):
        try:
            data = next(self.iter_loader)
        except StopIteration:
            self._epoch += 1
            self.iter_loader = iter(self._dataloader)
            data = next(self.iter_loader)
        return data

    def __len__(self):
        return len(self._dataloader)


class LogBuffer:
    def __init__(self):
        self.val_history = {}

    def update(self, vars, count=1):
        for key, var in vars.items():
            self.val_history.setdefault(key, []).append((var, count))


class Hook:
    def after_train_iter(self, runner):
        pass


class OptimizerHook(Hook):
    def after_train_iter(self, runner):
        runner.optimizer.zero_grad()
        runner.outputs['loss'].backward()
        runner.optimizer.step()


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(6, 8), nn.ReLU())
        self.head = nn.Linear(8, 3)

    def forward(self, img, gt_label):
        return F.cross_entropy(self.head(self.backbone(img)), gt_label)

    def _parse_losses(self, loss):
        return loss, dict(loss=loss.item())

    def train_step(self, data, optimizer=None, **kwargs):
        img, gt_label = data
        loss, log_vars = self._parse_losses(self(img, gt_label))
        return dict(loss=loss, log_vars=log_vars, num_samples=len(img))

    def val_step(self, data, optimizer=None, **kwargs):
        img, gt_label = data
        loss, log_vars = self._parse_losses(self(img, gt_label))
        return dict(loss=loss, log_vars=log_vars, num_samples=len(img))


class IterBasedRunner:
    """Iteration-based Runner."""

    def __init__(self, model, optimizer, max_iters):
        self.model = model
        self.optimizer = optimizer
        self._max_iters = max_iters
        self._iter = 0
        self._inner_iter = 0
        self._epoch = 0
        self.log_buffer = LogBuffer()
        self._hooks = []
        self.outputs = None
        self.val_outputs = []

    @property
    def iter(self):
        return self._iter

    def register_hook(self, hook):
        self._hooks.append(hook)

    def call_hook(self, fn_name):
        for hook in self._hooks:
            getattr(hook, fn_name, lambda runner: None)(self)

    def train(self, data_loader, **kwargs):
        self.model.train()
        self.mode = 'train'
        self.data_loader = data_loader
        self._epoch = data_loader.epoch
        data_batch = next(data_loader)
        self.call_hook('before_train_iter')
        outputs = self.model.train_step(data_batch, self.optimizer, **kwargs)
        if not isinstance(outputs, dict):
            raise TypeError('model.train_step() must return a dict')
        if 'log_vars' in outputs:
            self.log_buffer.update(outputs['log_vars'], outputs['num_samples'])
        self.outputs = outputs
        self.call_hook('after_train_iter')
        self._inner_iter += 1
        self._iter += 1

    @torch.no_grad()
    def val(self, data_loader, **kwargs):
        self.model.eval()
        self.mode = 'val'
        self.data_loader = data_loader
        data_batch = next(data_loader)
        self.call_hook('before_val_iter')
        outputs = self.model.val_step(data_batch, **kwargs)
        if not isinstance(outputs, dict):
            raise TypeError('model.val_step() must return a dict')
        if 'log_vars' in outputs:
            self.log_buffer.update(outputs['log_vars'], outputs['num_samples'])
        self.outputs = outputs
        self.val_outputs.append(outputs)
        self.call_hook('after_val_iter')
        self._inner_iter += 1

    def run(self, data_loaders, workflow, max_iters=None, **kwargs):
        assert isinstance(data_loaders, list)
        assert len(data_loaders) == len(workflow)
        if max_iters is not None:
            self._max_iters = max_iters

        iter_loaders = [IterLoader(x) for x in data_loaders]

        self.call_hook('before_epoch')

        while self.iter < self._max_iters:
            for i, flow in enumerate(workflow):
                self._inner_iter = 0
                mode, iters = flow
                if not isinstance(mode, str) or not hasattr(self, mode):
                    raise ValueError('runner has no method named "{}" to run a workflow'.format(mode))
                iter_runner = getattr(self, mode)
                for _ in range(iters):
                    if mode == 'train' and self.iter >= self._max_iters:
                        break
                    iter_runner(iter_loaders[i], **kwargs)

        self.call_hook('after_epoch')


if __name__ == "__main__":
    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    ds_train = torch.utils.data.TensorDataset(torch.randn(16, 6, generator=g), torch.randint(0, 3, (16,), generator=g))
    ds_val = torch.utils.data.TensorDataset(torch.randn(8, 6, generator=g), torch.randint(0, 3, (8,), generator=g))
    train_loader = torch.utils.data.DataLoader(ds_train, batch_size=4, shuffle=True)
    val_loader = torch.utils.data.DataLoader(ds_val, batch_size=4)

    model = Classifier()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    runner = IterBasedRunner(model, optimizer, max_iters=6)
    runner.register_hook(OptimizerHook())

    before = [p.detach().clone() for p in model.parameters()]
    runner.run([train_loader, val_loader], [('train', 3), ('val', 2)])

    assert len(runner.val_outputs) == 4
    assert all(o['loss'].grad_fn is None and not o['loss'].requires_grad for o in runner.val_outputs)
    with torch.no_grad():
        assert all(not torch.equal(b, p) for b, p in zip(before, model.parameters()))
    print("evidence holds: %d val_step losses carry no grad_fn (no_grad via decorator); training still updates weights"
          % len(runner.val_outputs))
