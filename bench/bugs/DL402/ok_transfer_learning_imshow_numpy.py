# source: https://github.com/pytorch/tutorials/blob/main/beginner_source/transfer_learning_tutorial.py
# category: DL402
# expect: clean
# evidence: imshow calls inp.numpy() only on image batches from the loader (no grad) and from visualize_model's no_grad loop, so it never raises, while train_model still trains the classifier
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from torch.optim import lr_scheduler

shown = []


def imshow(inp, title=None):
    """Display image for Tensor."""
    inp = inp.numpy().transpose((1, 2, 0))
    mean = np.array([0.485, 0.456, 0.406])
    std = np.array([0.229, 0.224, 0.225])
    inp = std * inp + mean
    inp = np.clip(inp, 0, 1)
    shown.append((inp, title))  # plt.imshow(inp); plt.title(title) in the tutorial


def make_grid(inputs):
    return torch.cat(list(inputs), dim=2)


def train_model(model, criterion, optimizer, scheduler, dataloaders, dataset_sizes, num_epochs=2):
    best_model_wts = copy.deepcopy(model.state_dict())
    best_acc = 0.0
    for epoch in range(num_epochs):
        for phase in ['train', 'val']:
            if phase == 'train':
                model.train()
            else:
                model.eval()
            running_loss = 0.0
            running_corrects = 0
            for inputs, labels in dataloaders[phase]:
                optimizer.zero_grad()
                with torch.set_grad_enabled(phase == 'train'):
                    outputs = model(inputs)
                    _, preds = torch.max(outputs, 1)
                    loss = criterion(outputs, labels)
                    if phase == 'train':
                        loss.backward()
                        optimizer.step()
                running_loss += loss.item() * inputs.size(0)
                running_corrects += torch.sum(preds == labels.data)
            if phase == 'train':
                scheduler.step()
            epoch_acc = running_corrects.double() / dataset_sizes[phase]
            if phase == 'val' and epoch_acc > best_acc:
                best_acc = epoch_acc
                best_model_wts = copy.deepcopy(model.state_dict())
    model.load_state_dict(best_model_wts)
    return model


def visualize_model(model, dataloaders, class_names, num_images=4):
    was_training = model.training
    model.eval()
    images_so_far = 0
    with torch.no_grad():
        for i, (inputs, labels) in enumerate(dataloaders['val']):
            outputs = model(inputs)
            _, preds = torch.max(outputs, 1)
            for j in range(inputs.size()[0]):
                images_so_far += 1
                imshow(inputs.cpu().data[j], title=f'predicted: {class_names[preds[j]]}')
                if images_so_far == num_images:
                    model.train(mode=was_training)
                    return
        model.train(mode=was_training)


if __name__ == "__main__":
    torch.manual_seed(0)
    class_names = ['ants', 'bees']
    dataloaders = {p: [(torch.rand(4, 3, 8, 8), torch.randint(0, 2, (4,))) for _ in range(3)] for p in ['train', 'val']}
    dataset_sizes = {p: 12 for p in dataloaders}

    inputs, classes = next(iter(dataloaders['train']))
    imshow(make_grid(inputs), title=[class_names[x] for x in classes])

    model_ft = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4, 2))
    w0 = model_ft[4].weight.detach().clone()
    criterion = nn.CrossEntropyLoss()
    optimizer_ft = optim.SGD(model_ft.parameters(), lr=0.01, momentum=0.9)
    exp_lr_scheduler = lr_scheduler.StepLR(optimizer_ft, step_size=7, gamma=0.1)
    model_ft = train_model(model_ft, criterion, optimizer_ft, exp_lr_scheduler, dataloaders, dataset_sizes)
    visualize_model(model_ft, dataloaders, class_names)

    assert len(shown) == 1 + 4 and shown[0][0].shape == (8, 32, 3)
    assert not torch.equal(w0, model_ft[4].weight.detach())
    print("evidence holds: every .numpy() call sees a tensor without grad; training and visualisation both run")
