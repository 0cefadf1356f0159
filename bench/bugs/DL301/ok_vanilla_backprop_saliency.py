# source: https://github.com/utkuozbulak/pytorch-cnn-visualizations/blob/master/src/vanilla_backprop.py
# category: DL301
# expect: clean
# evidence: saliency maps need gradients: after model.eval() each image's backward fills the hooked first-layer input gradient, which differs per image and class
import torch
from torch import nn


class TinyAlexNet(nn.Module):
    def __init__(self, num_classes=5):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(8, 8, 3, padding=1), nn.ReLU())
        self.classifier = nn.Sequential(nn.Flatten(), nn.Linear(8 * 8 * 8, num_classes))

    def forward(self, x):
        return self.classifier(self.features(x))


class VanillaBackprop():
    """
        Produces gradients generated with vanilla back propagation from the image
    """
    def __init__(self, model):
        self.model = model
        self.gradients = None
        # Put model in evaluation mode
        self.model.eval()
        # Hook the first layer to get the gradient
        self.hook_layers()

    def hook_layers(self):
        def hook_function(module, grad_in, grad_out):
            self.gradients = grad_in[0]

        # Register hook to the first layer
        first_layer = list(self.model.features._modules.items())[0][1]
        first_layer.register_full_backward_hook(hook_function)

    def generate_gradients(self, input_image, target_class):
        # Forward
        model_output = self.model(input_image)
        # Zero grads
        self.model.zero_grad()
        # Target for backprop
        one_hot_output = torch.zeros(1, model_output.size()[-1])
        one_hot_output[0][target_class] = 1
        # Backward pass
        model_output.backward(gradient=one_hot_output)
        # Convert Pytorch variable to numpy array
        # [0] to get rid of the first channel (1,3,224,224)
        gradients_as_arr = self.gradients.numpy()[0]
        return gradients_as_arr


def saliency_for_dataset(model, images, target_classes):
    VBP = VanillaBackprop(model)
    maps = []
    for prep_img, target_class in zip(images, target_classes):
        prep_img = prep_img.clone().requires_grad_(True)
        vanilla_grads = VBP.generate_gradients(prep_img, target_class)
        maps.append(abs(vanilla_grads).max(axis=0))
    return maps


if __name__ == "__main__":
    torch.manual_seed(0)
    model = TinyAlexNet()
    images = [torch.rand(1, 3, 16, 16) for _ in range(3)]
    maps = saliency_for_dataset(model, images, [0, 2, 4])
    assert not model.training
    assert len(maps) == 3 and all(m.shape == (16, 16) and m.sum() > 0 for m in maps)
    assert not (maps[0] == maps[1]).all()
    print("evidence holds: every image produced a nonzero saliency map from its backward pass")
