# source: https://github.com/mmasana/FACIL/issues/37
# category: DL201
# expect: flag 21, 41
# evidence: the model's gradients are identical with the attention-distillation weight gamma at 1 or at 0: the LwM attention term trains nothing
import copy

import torch
from torch import nn
import torch.nn.functional as F


class GradCAM:
    def __init__(self, model, layer_name):
        self.model = model
        self.layer = dict(model.named_modules())[layer_name]
        self.activations = None
        self.gradients = None

    def __enter__(self):
        def forward_hook(module, input, output):
            self.activations = output.detach()

        def backward_hook(module, grad_input, grad_output):
            self.gradients = grad_output[0].detach()

        self.fwd_handle = self.layer.register_forward_hook(forward_hook)
        self.bwd_handle = self.layer.register_full_backward_hook(backward_hook)
        return self

    def __exit__(self, *exc):
        self.fwd_handle.remove()
        self.bwd_handle.remove()

    def __call__(self, input, class_indices=None, return_outputs=False):
        model_output = self.model(input)
        if class_indices is None:
            class_indices = model_output.argmax(dim=1)
        self.model.zero_grad()
        score = model_output.gather(1, class_indices[:, None]).sum()
        score.backward(retain_graph=True)
        with torch.no_grad():
            weights = F.adaptive_avg_pool2d(self.gradients, 1)
            att_map = (weights * self.activations).sum(dim=1, keepdim=True)
            att_map = F.relu(att_map)
        return (att_map, model_output) if return_outputs else att_map


class SmallNet(nn.Module):
    def __init__(self, num_classes=4):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.conv2 = nn.Conv2d(8, 8, 3, padding=1)
        self.fc = nn.Linear(8, num_classes)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        return self.fc(x.mean(dim=(2, 3)))


class Appr:
    def __init__(self, model, beta=1.0, gamma=1.0, gradcam_layer="conv2", lr=0.05):
        self.model = model
        self.model_old = None
        self.beta, self.gamma = beta, gamma
        self.gradcam_layer = gradcam_layer
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr)

    def post_train_process(self):
        self.model_old = copy.deepcopy(self.model)
        self.model_old.eval()

    def attention_distillation_loss(self, attention_map1, attention_map2):
        a1 = F.normalize(attention_map1.flatten(1), p=2, dim=1)
        a2 = F.normalize(attention_map2.flatten(1), p=2, dim=1)
        return (a1 - a2).norm(p=1, dim=1).mean()

    def criterion(self, outputs, targets, outputs_old, attmap, attmap_old):
        loss = F.cross_entropy(outputs, targets)
        loss = loss + self.beta * F.kl_div(F.log_softmax(outputs, 1), F.softmax(outputs_old, 1), reduction="batchmean")
        loss = loss + self.gamma * self.attention_distillation_loss(attmap, attmap_old)
        return loss

    def compute_loss(self, images, targets):
        with GradCAM(self.model_old, self.gradcam_layer) as gradcam_old:
            attmap_old, outputs_old = gradcam_old(images, return_outputs=True)
        with GradCAM(self.model, self.gradcam_layer) as gradcam:
            attmap = gradcam(images)
        self.model.zero_grad()
        outputs = self.model(images)
        return self.criterion(outputs, targets, outputs_old.detach(), attmap, attmap_old)

    def train_epoch(self, loader):
        self.model.train()
        for images, targets in loader:
            loss = self.compute_loss(images, targets)
            self.optimizer.zero_grad()
            loss.backward()
            self.optimizer.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    appr = Appr(SmallNet())
    appr.post_train_process()
    appr.model = SmallNet()
    appr.optimizer = torch.optim.SGD(appr.model.parameters(), lr=0.05)
    images, targets = torch.randn(4, 3, 8, 8), torch.randint(0, 4, (4,))
    params = list(appr.model.parameters())
    appr.gamma = 1.0
    g_on = torch.autograd.grad(appr.compute_loss(images, targets), params)
    appr.gamma = 0.0
    g_off = torch.autograd.grad(appr.compute_loss(images, targets), params)
    assert all(torch.equal(a, b) for a, b in zip(g_on, g_off))
    with GradCAM(appr.model, "conv2") as gc, GradCAM(appr.model_old, "conv2") as gc_old:
        assert appr.attention_distillation_loss(gc(images), gc_old(images)).item() > 0
    appr.gamma = 1.0
    appr.train_epoch([(images, targets)])
    print("evidence holds: the attention maps come from detached hook activations, so gamma changes no gradient")
