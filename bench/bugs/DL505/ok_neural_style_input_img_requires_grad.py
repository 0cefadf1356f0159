# source: https://github.com/pytorch/tutorials/blob/main/advanced_source/neural_style_tutorial.py
# category: DL505
# expect: clean
# evidence: the image being optimised is a clone of the content image flagged requires_grad_(True) while the network is frozen: the style/content loss has a graph into input_img and L-BFGS changes it
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


class ContentLoss(nn.Module):
    def __init__(self, target):
        super(ContentLoss, self).__init__()
        self.target = target.detach()

    def forward(self, input):
        self.loss = F.mse_loss(input, self.target)
        return input


def gram_matrix(input):
    a, b, c, d = input.size()
    features = input.view(a * b, c * d)
    G = torch.mm(features, features.t())
    return G.div(a * b * c * d)


class StyleLoss(nn.Module):
    def __init__(self, target_feature):
        super(StyleLoss, self).__init__()
        self.target = gram_matrix(target_feature).detach()

    def forward(self, input):
        self.loss = F.mse_loss(gram_matrix(input), self.target)
        return input


def get_style_model_and_losses(cnn, style_img, content_img):
    model = nn.Sequential()
    content_losses, style_losses = [], []
    for i, layer in enumerate(cnn.children()):
        model.add_module(f"layer_{i}", layer)
        if isinstance(layer, nn.Conv2d):
            target = model(content_img).detach()
            content_loss = ContentLoss(target)
            model.add_module(f"content_loss_{i}", content_loss)
            content_losses.append(content_loss)
            target_feature = model(style_img).detach()
            style_loss = StyleLoss(target_feature)
            model.add_module(f"style_loss_{i}", style_loss)
            style_losses.append(style_loss)
    return model, style_losses, content_losses


def get_input_optimizer(input_img):
    optimizer = optim.LBFGS([input_img])
    return optimizer


def run_style_transfer(cnn, content_img, style_img, input_img, num_steps=5, style_weight=1000000, content_weight=1):
    model, style_losses, content_losses = get_style_model_and_losses(cnn, style_img, content_img)
    input_img.requires_grad_(True)
    model.eval()
    model.requires_grad_(False)
    optimizer = get_input_optimizer(input_img)

    run = [0]
    while run[0] <= num_steps:
        def closure():
            with torch.no_grad():
                input_img.clamp_(0, 1)
            optimizer.zero_grad()
            model(input_img)
            style_score = sum(sl.loss for sl in style_losses)
            content_score = sum(cl.loss for cl in content_losses)
            loss = style_score * style_weight + content_score * content_weight
            loss.backward()
            run[0] += 1
            return style_score + content_score
        optimizer.step(closure)

    with torch.no_grad():
        input_img.clamp_(0, 1)
    return input_img


if __name__ == "__main__":
    torch.manual_seed(0)
    cnn = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.Conv2d(4, 4, 3, padding=1))
    content_img = torch.rand(1, 3, 8, 8)
    style_img = torch.rand(1, 3, 8, 8)
    input_img = content_img.clone()
    output = run_style_transfer(cnn, content_img, style_img, input_img)
    assert output.is_leaf and output.grad is not None and output.grad.abs().sum() > 0
    assert not torch.equal(output.detach(), content_img)
    assert all(not p.requires_grad for p in cnn.parameters())
    print("evidence holds: the flagged input image receives gradients from the loss and is optimised")
