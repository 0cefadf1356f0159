# source: https://prodopsy.com/how-can-the-backward-function-in-tensor-influence-the-matrix-in-model
# category: DL206
# expect: clean
# evidence: weight.detach().zero_() is not thrown away: the in-place zero_ writes into the parameter's storage, which stays a leaf requiring grad, so the model starts from zeros and SGD training changes the weights
import torch
import torch.nn.functional as F

torch.manual_seed(0)

##########################
### SETTINGS
##########################

random_seed = 123
learning_rate = 0.1
num_epochs = 3
batch_size = 32

# Architecture
num_features = 20
num_classes = 4


##########################
### MODEL
##########################

class SoftmaxRegression(torch.nn.Module):

    def __init__(self, num_features, num_classes):
        super(SoftmaxRegression, self).__init__()
        self.linear = torch.nn.Linear(num_features, num_classes)

        self.linear.weight.detach().zero_()
        self.linear.bias.detach().zero_()

    def forward(self, x):
        logits = self.linear(x)
        probas = F.softmax(logits, dim=1)
        return logits, probas


def compute_accuracy(model, data_loader):
    correct_pred, num_examples = 0, 0
    with torch.no_grad():
        for features, targets in data_loader:
            logits, probas = model(features)
            _, predicted_labels = torch.max(probas, 1)
            num_examples += targets.size(0)
            correct_pred += (predicted_labels == targets).sum()
    return correct_pred.float() / num_examples * 100


torch.manual_seed(random_seed)
true_w = torch.randn(num_features, num_classes)
X = torch.randn(256, num_features)
y = (X @ true_w).argmax(dim=1)
train_loader = [(X[i:i + batch_size], y[i:i + batch_size]) for i in range(0, 256, batch_size)]

model = SoftmaxRegression(num_features=num_features, num_classes=num_classes)
initial_weight = model.linear.weight.detach().clone()
optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)

for epoch in range(num_epochs):
    for batch_idx, (features, targets) in enumerate(train_loader):
        ### FORWARD AND BACK PROP
        logits, probas = model(features)

        cost = F.cross_entropy(logits, targets)
        optimizer.zero_grad()
        cost.backward()

        ### UPDATE MODEL PARAMETERS
        optimizer.step()

    print('Epoch: %03d/%03d training accuracy: %.2f%%' % (
        epoch + 1, num_epochs, compute_accuracy(model, train_loader)))

if __name__ == "__main__":
    assert torch.count_nonzero(initial_weight) == 0
    assert model.linear.weight.is_leaf and model.linear.weight.requires_grad
    assert model.linear.weight.grad is not None
    assert torch.count_nonzero(model.linear.weight.detach()) > 0
    acc = compute_accuracy(model, train_loader).item()
    assert acc > 50
    print("evidence holds: weights start at exactly zero, get gradients and are trained to %.1f%% accuracy" % acc)
