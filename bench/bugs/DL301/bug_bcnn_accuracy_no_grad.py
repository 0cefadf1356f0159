# source: https://github.com/HaoMood/bilinear-cnn/issues/13
# category: DL301
# expect: flag 97, 103
# evidence: every test batch scored inside BCNNManager._accuracy() returns a score with a grad_fn (full bilinear-CNN graph built per test batch) although _accuracy never backpropagates.
import torch


class BCNN(torch.nn.Module):
    """B-CNN: conv features -> bilinear pooling -> sqrt-normalize -> L2-normalize -> fc."""
    def __init__(self):
        torch.nn.Module.__init__(self)
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(inplace=True),
            torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.ReLU(inplace=True),
            torch.nn.MaxPool2d(2))
        self.fc = torch.nn.Linear(8**2, 5)

    def forward(self, X):
        N = X.size()[0]
        assert X.size() == (N, 3, 16, 16)
        X = self.features(X)
        assert X.size() == (N, 8, 4, 4)
        X = X.view(N, 8, 4**2)
        X = torch.bmm(X, torch.transpose(X, 1, 2)) / (4**2)  # Bilinear
        X = X.view(N, 8**2)
        X = torch.sqrt(X + 1e-5)
        X = torch.nn.functional.normalize(X)
        X = self.fc(X)
        assert X.size() == (N, 5)
        return X


class BCNNManager(object):
    def __init__(self, options):
        self._options = options
        self._net = BCNN()
        self._criterion = torch.nn.CrossEntropyLoss()
        self._solver = torch.optim.SGD(
            self._net.parameters(), lr=self._options['base_lr'],
            momentum=0.9, weight_decay=self._options['weight_decay'])
        self._scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(
            self._solver, mode='max', factor=0.1, patience=3, threshold=1e-4)
        g = torch.Generator().manual_seed(0)
        train_data = torch.utils.data.TensorDataset(
            torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 5, (8,), generator=g))
        test_data = torch.utils.data.TensorDataset(
            torch.randn(8, 3, 16, 16, generator=g), torch.randint(0, 5, (8,), generator=g))
        self._train_loader = torch.utils.data.DataLoader(
            train_data, batch_size=self._options['batch_size'], shuffle=True)
        self._test_loader = torch.utils.data.DataLoader(
            test_data, batch_size=4, shuffle=False)

    def train(self):
        """Train the network."""
        best_acc = 0.0
        best_epoch = None
        print('Epoch\tTrain loss\tTrain acc\tTest acc')
        for t in range(self._options['epochs']):
            epoch_loss = []
            num_correct = 0
            num_total = 0
            for X, y in self._train_loader:
                # Data.
                X = torch.autograd.Variable(X)
                y = torch.autograd.Variable(y)

                # Clear the existing gradients.
                self._solver.zero_grad()
                # Forward pass.
                score = self._net(X)
                loss = self._criterion(score, y)
                epoch_loss.append(loss.item())
                # Prediction.
                _, prediction = torch.max(score.data, 1)
                num_total += y.size(0)
                num_correct += torch.sum(prediction == y.data).item()
                # Backward pass.
                loss.backward()
                self._solver.step()
            train_acc = 100 * num_correct / num_total
            test_acc = self._accuracy(self._test_loader)
            self._scheduler.step(test_acc)
            if test_acc > best_acc:
                best_acc = test_acc
                best_epoch = t + 1
                print('*', end='')
            print('%d\t%4.3f\t\t%4.2f%%\t\t%4.2f%%' %
                  (t+1, sum(epoch_loss) / len(epoch_loss), train_acc, test_acc))
        print('Best at epoch %s, test accuaray %f' % (best_epoch, best_acc))

    def _accuracy(self, data_loader):
        """Compute the train/test accuracy."""
        self._net.train(False)
        num_correct = 0
        num_total = 0
        for X, y in data_loader:
            # Data.
            X = torch.autograd.Variable(X)
            y = torch.autograd.Variable(y)

            # Prediction.
            score = self._net(X)
            _, prediction = torch.max(score.data, 1)
            num_total += y.size(0)
            num_correct += torch.sum(prediction == y.data).item()
        self._net.train(True)  # Set the model to training phase
        return 100 * num_correct / num_total


if __name__ == "__main__":
    torch.manual_seed(0)
    options = {'base_lr': 0.05, 'batch_size': 4, 'epochs': 2, 'weight_decay': 5e-4}
    manager = BCNNManager(options)

    eval_scores = []

    def record(module, inp, out):
        if not module.training:
            eval_scores.append(out.grad_fn is not None)

    h = manager._net.register_forward_hook(record)
    manager.train()
    h.remove()
    assert len(eval_scores) == 4 and all(eval_scores), eval_scores
    print("evidence holds: all %d scores computed in _accuracy() carry a grad_fn (graphs built at test time)" % len(eval_scores))
