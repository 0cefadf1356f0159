# source: https://github.com/PingoLH/FCHarDNet/issues/61
# category: DL502
# expect: flag 25, 26
# evidence: fusing conv+BN for test.py raises "a leaf Variable that requires grad is being used in an in-place operation." when the fused weights are copied into the new conv
import torch
import torch.nn as nn


class ConvLayer(nn.Sequential):
    def __init__(self, in_channels, out_channels, kernel=3, stride=1):
        super().__init__()
        self.add_module('conv', nn.Conv2d(in_channels, out_channels, kernel_size=kernel,
                                          stride=stride, padding=kernel // 2, bias=False))
        self.add_module('norm', nn.BatchNorm2d(out_channels))
        self.add_module('relu', nn.ReLU(inplace=True))

    def fuse_bn(self):
        conv = self.conv
        bn = self.norm
        std = torch.sqrt(bn.running_var + bn.eps)
        W = conv.weight * (bn.weight / std).view(-1, 1, 1, 1)
        b = bn.bias - bn.weight * bn.running_mean / std
        cconv = nn.Conv2d(conv.in_channels, conv.out_channels, kernel_size=conv.kernel_size,
                          stride=conv.stride, padding=conv.padding, bias=True)
        cconv.weight[:, :, :, :] = W[:, :, :, :]
        cconv.bias[:] = b[:]
        return nn.Sequential(cconv, nn.ReLU(inplace=True))


class HarDNetLite(nn.Module):
    def __init__(self, n_classes=3):
        super().__init__()
        self.base = nn.ModuleList([ConvLayer(3, 8), ConvLayer(8, 16), ConvLayer(16, 16)])
        self.finalConv = nn.Conv2d(16, n_classes, kernel_size=1)

    def forward(self, x):
        for layer in self.base:
            x = layer(x)
        return self.finalConv(x)

    def v2_transform(self):
        for i in range(len(self.base)):
            if isinstance(self.base[i], ConvLayer):
                self.base[i] = self.base[i].fuse_bn()


def test(model, images):
    model.eval()
    model.v2_transform()
    with torch.no_grad():
        return model(images)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = HarDNetLite()
    images = torch.randn(1, 3, 8, 8)
    try:
        test(model, images)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised is not None and "leaf Variable that requires grad is being used in an in-place operation" in raised, raised
    print("evidence holds: copying the fused weight into cconv.weight[:, :, :, :] raises the leaf in-place error")
