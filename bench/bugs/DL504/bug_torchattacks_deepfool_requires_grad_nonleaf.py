# source: https://github.com/Harry24k/adversarial-attacks-pytorch/issues/2
# category: DL504
# expect: flag 32
# evidence: after the first DeepFool step image = clamp(image + r) is a non-leaf, and the next iteration's image.requires_grad = True raises "you can only change requires_grad flags of leaf variables."
import torch
import torch.nn as nn


class Attack:
    def __init__(self, name, model):
        self.attack = name
        self.model = model
        self.device = next(model.parameters()).device

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)


class DeepFool(Attack):
    def __init__(self, model, steps=3):
        super(DeepFool, self).__init__("DeepFool", model)
        self.steps = steps

    def forward(self, images, labels):
        images = images.clone().to(self.device)
        for b in range(images.shape[0]):
            image = images[b:b + 1, :, :, :].clone()
            output = self.model(image)[0]
            _, pre_0 = torch.max(output, 0)

            for i in range(self.steps):
                image.requires_grad = True
                output = self.model(image)[0]
                _, pre = torch.max(output, 0)
                if pre != pre_0:
                    image = torch.clamp(image, min=0, max=1).detach()
                    break
                f_0 = output[pre_0]
                grad_f_0 = torch.autograd.grad(f_0, image, retain_graph=True, create_graph=False)[0]
                ws, fs = [], []
                for k in range(len(output)):
                    if k == pre_0:
                        continue
                    grad_f_k = torch.autograd.grad(output[k], image, retain_graph=True, create_graph=False)[0]
                    ws.append(grad_f_k - grad_f_0)
                    fs.append((output[k] - f_0).detach())
                values = [abs(f) / w.norm() for f, w in zip(fs, ws)]
                l_ = int(torch.stack(values).argmin())
                r = (abs(fs[l_]) + 1e-4) / ws[l_].norm() ** 2 * ws[l_]
                image = torch.clamp(image + r, min=0, max=1)

            images[b:b + 1, :, :, :] = image.detach()
        return images


if __name__ == "__main__":
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 4 * 4, 5))
    model.eval()
    images = torch.rand(2, 3, 4, 4) * 0.1 + 0.45
    labels = torch.randint(0, 5, (2,))
    attack = DeepFool(model, steps=3)
    try:
        attack(images, labels)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised == "you can only change requires_grad flags of leaf variables.", raised
    print("evidence holds: image = clamp(image + r) is computed from the grad-requiring image; setting its flag raises")
