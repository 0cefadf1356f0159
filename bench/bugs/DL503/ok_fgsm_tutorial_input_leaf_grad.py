# source: https://github.com/pytorch/tutorials/blob/main/beginner_source/fgsm_tutorial.py
# category: DL503
# expect: clean
# evidence: data is moved to the device first and then flagged requires_grad, so it is a leaf: data.grad is populated by loss.backward() and the FGSM step uses it
import torch
import torch.nn as nn
import torch.nn.functional as F

device = torch.device("cpu")


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 4, 3, 1)
        self.fc1 = nn.Linear(4 * 6 * 6, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = torch.flatten(x, 1)
        return F.log_softmax(self.fc1(x), dim=1)


def fgsm_attack(image, epsilon, data_grad):
    sign_data_grad = data_grad.sign()
    perturbed_image = image + epsilon * sign_data_grad
    perturbed_image = torch.clamp(perturbed_image, 0, 1)
    return perturbed_image


def denorm(batch, mean=(0.1307,), std=(0.3081,)):
    mean = torch.tensor(mean).to(device).view(1, -1, 1, 1)
    std = torch.tensor(std).to(device).view(1, -1, 1, 1)
    return batch * std + mean


def normalize(batch, mean=(0.1307,), std=(0.3081,)):
    mean = torch.tensor(mean).to(device).view(1, -1, 1, 1)
    std = torch.tensor(std).to(device).view(1, -1, 1, 1)
    return (batch - mean) / std


def test(model, device, test_loader, epsilon):
    correct = 0
    attacked = 0
    grads_seen = []
    for data, target in test_loader:
        data, target = data.to(device), target.to(device)
        data.requires_grad = True
        output = model(data)
        init_pred = output.max(1, keepdim=True)[1]
        loss = F.nll_loss(output, target)
        model.zero_grad()
        loss.backward()
        data_grad = data.grad
        grads_seen.append(data_grad)
        data_denorm = denorm(data)
        perturbed_data = fgsm_attack(data_denorm, epsilon, data_grad)
        perturbed_data_normalized = normalize(perturbed_data)
        output = model(perturbed_data_normalized)
        final_pred = output.max(1, keepdim=True)[1]
        attacked += 1
        if final_pred.item() == init_pred.item():
            correct += 1
    final_acc = correct / float(len(test_loader))
    print(f"Epsilon: {epsilon}\tTest Accuracy = {correct} / {len(test_loader)} = {final_acc}")
    return final_acc, grads_seen


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Net().to(device)
    model.eval()
    test_loader = [(torch.rand(1, 1, 14, 14), torch.randint(0, 10, (1,))) for _ in range(4)]
    acc, grads_seen = test(model, device, test_loader, epsilon=0.3)
    assert len(grads_seen) == 4
    assert all(g is not None and g.abs().sum() > 0 for g in grads_seen)
    print("evidence holds: data is a leaf when requires_grad is set, so data.grad is populated for the attack")
