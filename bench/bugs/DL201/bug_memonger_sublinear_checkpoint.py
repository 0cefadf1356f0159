# source: https://github.com/Lyken17/pytorch-memonger/issues/4
# category: DL201
# expect: flag 63, 66
# evidence: the input of every checkpointed segment does not require grad, so "None of the inputs have requires_grad=True" and all conv/bn parameters of the SublinearSequential body keep grad None and never change; only the classifier outside it trains
import math
import warnings

import torch
import torch.nn as nn
from torch.utils.checkpoint import checkpoint

torch.manual_seed(0)


class SublinearSequential(nn.Sequential):
    def __init__(self, *args):
        super(SublinearSequential, self).__init__(*args)
        self.reforward = False
        self.momentum_dict = {}
        self.set_reforward(True)

    def set_reforward(self, enabled=True):
        if not self.reforward and enabled:
            print("Rescale BN Momemtum for re-forwarding purpose")
            for n, m in self.named_modules():
                if isinstance(m, nn.modules.batchnorm._BatchNorm):
                    self.momentum_dict[n] = m.momentum
                    m.momentum = math.sqrt(m.momentum)
        if self.reforward and not enabled:
            print("Re-store BN Momemtum")
            for n, m in self.named_modules():
                if isinstance(m, nn.modules.batchnorm._BatchNorm):
                    m.momentum = self.momentum_dict[n]
        self.reforward = enabled

    def forward(self, input):
        if self.reforward:
            return self.sublinear_forward(input)
        else:
            return self.normal_forward(input)

    def normal_forward(self, input):
        return super(SublinearSequential, self).forward(input)

    def sublinear_forward(self, input):
        def run_function(start, end, functions):
            def forward(*inputs):
                input = inputs[0]
                for j in range(start, end + 1):
                    input = functions[j](input)
                return input
            return forward

        functions = list(self.children())
        segments = int(math.sqrt(len(functions)))
        segment_size = len(functions) // segments
        # the last chunk has to be non-volatile
        end = -1
        if not isinstance(input, tuple):
            inputs = (input,)
        for start in range(0, segment_size * (segments - 1), segment_size):
            end = start + segment_size - 1
            inputs = checkpoint(run_function(start, end, functions), *inputs, use_reentrant=True)
            if not isinstance(inputs, tuple):
                inputs = (inputs,)
        output = checkpoint(run_function(end + 1, len(functions) - 1, functions), *inputs, use_reentrant=True)
        return output


def conv_bn(inp, oup, stride):
    return [nn.Conv2d(inp, oup, 3, stride, 1, bias=False), nn.BatchNorm2d(oup), nn.ReLU(inplace=True)]


features = SublinearSequential(
    *conv_bn(3, 8, 1),
    *conv_bn(8, 16, 2),
    *conv_bn(16, 16, 1),
    *conv_bn(16, 32, 2),
    nn.AdaptiveAvgPool2d(1),
    nn.Flatten(),
)
classifier = nn.Linear(32, 10)
net = nn.Sequential(features, classifier)

criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)

conv_before = features[0].weight.detach().clone()
fc_before = classifier.weight.detach().clone()

with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for step in range(3):
        inputs = torch.randn(4, 3, 16, 16)
        targets = torch.randint(0, 10, (4,))
        optimizer.zero_grad()
        outputs = net(inputs)
        loss = criterion(outputs, targets)
        loss.backward()
        optimizer.step()

if __name__ == "__main__":
    body_grads = [p.grad for p in features.parameters()]
    assert all(g is None for g in body_grads)
    assert torch.equal(conv_before, features[0].weight.detach())
    assert not torch.equal(fc_before, classifier.weight.detach())
    assert any("None of the inputs have requires_grad=True" in str(w.message) for w in caught)
    print("evidence holds: %d body parameters kept grad None and the first conv never changed; "
          "only the classifier trained" % len(body_grads))
