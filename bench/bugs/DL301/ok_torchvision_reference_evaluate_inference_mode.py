# source: https://github.com/pytorch/vision/blob/main/references/classification/train.py
# category: DL301
# expect: clean
# evidence: evaluate() loops under torch.inference_mode() after model.eval(): its outputs are inference tensors with no graph, and training between evaluations still learns
import torch
import torch.nn as nn


def accuracy(output, target, topk=(1,)):
    """Computes the accuracy over the k top predictions for the specified values of k"""
    with torch.inference_mode():
        maxk = max(topk)
        batch_size = target.size(0)
        _, pred = output.topk(maxk, 1, True, True)
        pred = pred.t()
        correct = pred.eq(target[None])
        res = []
        for k in topk:
            correct_k = correct[:k].flatten().sum(dtype=torch.float32)
            res.append(correct_k * (100.0 / batch_size))
        return res


def train_one_epoch(model, criterion, optimizer, data_loader, device, epoch):
    model.train()
    for i, (image, target) in enumerate(data_loader):
        image, target = image.to(device), target.to(device)
        output = model(image)
        loss = criterion(output, target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def evaluate(model, criterion, data_loader, device, print_freq=100, log_suffix=""):
    model.eval()
    header = f"Test: {log_suffix}"
    num_processed_samples = 0
    total_loss, total_acc1 = 0.0, 0.0
    last_output = None
    with torch.inference_mode():
        for image, target in data_loader:
            image = image.to(device, non_blocking=True)
            target = target.to(device, non_blocking=True)
            output = model(image)
            loss = criterion(output, target)

            acc1, acc5 = accuracy(output, target, topk=(1, 5))
            batch_size = image.shape[0]
            total_loss += loss.item() * batch_size
            total_acc1 += acc1.item() * batch_size
            num_processed_samples += batch_size
            last_output = output
    print(f"{header} Acc@1 {total_acc1 / num_processed_samples:.3f} loss {total_loss / num_processed_samples:.3f}")
    return total_acc1 / num_processed_samples, last_output


def main(epochs, data_loader, data_loader_test):
    device = torch.device("cpu")
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 8 * 8, 32), nn.ReLU(), nn.Linear(32, 10))
    criterion = nn.CrossEntropyLoss(label_smoothing=0.1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    results = []
    for epoch in range(epochs):
        train_one_epoch(model, criterion, optimizer, data_loader, device, epoch)
        results.append(evaluate(model, criterion, data_loader_test, device=device))
    return model, results


if __name__ == "__main__":
    torch.manual_seed(0)
    data = [(torch.randn(16, 3, 8, 8), torch.randint(0, 10, (16,))) for _ in range(4)]
    model, results = main(3, data, data)
    for acc1, output in results:
        assert output.is_inference() and not output.requires_grad and output.grad_fn is None
    assert results[-1][0] > results[0][0]
    print("evidence holds: evaluation outputs are inference tensors without a graph; accuracy rose over epochs")
