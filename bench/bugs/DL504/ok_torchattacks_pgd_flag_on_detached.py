# source: https://github.com/Harry24k/adversarial-attacks-pytorch/blob/master/torchattacks/attacks/pgd.py
# category: DL504
# expect: clean
# evidence: adv_images is re-detached after every update, so adv_images.requires_grad = True always hits a leaf: no error, and the attack moves the images within eps
import torch
import torch.nn as nn


class PGD:
    def __init__(self, model, eps=8 / 255, alpha=2 / 255, steps=10, random_start=True):
        self.model = model
        self.eps = eps
        self.alpha = alpha
        self.steps = steps
        self.random_start = random_start
        self.device = next(model.parameters()).device

    def get_logits(self, inputs):
        return self.model(inputs)

    def forward(self, images, labels):
        images = images.clone().detach().to(self.device)
        labels = labels.clone().detach().to(self.device)
        loss = nn.CrossEntropyLoss()
        adv_images = images.clone().detach()

        if self.random_start:
            adv_images = adv_images + torch.empty_like(adv_images).uniform_(-self.eps, self.eps)
            adv_images = torch.clamp(adv_images, min=0, max=1).detach()

        for _ in range(self.steps):
            adv_images.requires_grad = True
            outputs = self.get_logits(adv_images)
            cost = loss(outputs, labels)
            grad = torch.autograd.grad(cost, adv_images, retain_graph=False, create_graph=False)[0]
            adv_images = adv_images.detach() + self.alpha * grad.sign()
            delta = torch.clamp(adv_images - images, min=-self.eps, max=self.eps)
            adv_images = torch.clamp(images + delta, min=0, max=1).detach()

        return adv_images

    def __call__(self, images, labels):
        return self.forward(images, labels)


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 5))
    images = torch.rand(2, 3, 4, 4)
    labels = torch.randint(0, 5, (2,))
    adv = PGD(model, steps=4)(images, labels)
    assert adv.is_leaf and not adv.requires_grad
    assert (adv - images).abs().max() <= 8 / 255 + 1e-6
    assert not torch.equal(adv, images)
    print("evidence holds: the flag is always set on a freshly detached leaf; the attack runs and stays within eps")
