# source: https://github.com/zhuangdizhu/FedGen/issues/1
# category: DL402
# expect: flag 53, 54, 55, 90
# evidence: each client's test() sums its loss with grad on, and the server's evaluate() hands those tensors to np.sum, which raises "Can't call numpy() on Tensor that requires grad"
import copy

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    def __init__(self, in_dim=6, n_classes=3):
        super().__init__()
        self.fc1 = nn.Linear(in_dim, 16)
        self.fc2 = nn.Linear(16, n_classes)

    def forward(self, x, logit=False):
        out = self.fc2(F.relu(self.fc1(x)))
        results = {'output': F.log_softmax(out, dim=1)}
        if logit:
            results['logit'] = out
        return results


class User:
    def __init__(self, id, model, train_data, test_data, learning_rate=0.01, local_epochs=1):
        self.id = id
        self.model = copy.deepcopy(model)
        self.trainloader = train_data
        self.testloaderfull = test_data
        self.local_epochs = local_epochs
        self.loss = nn.NLLLoss()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=learning_rate)

    def set_parameters(self, model):
        self.model.load_state_dict(model.state_dict())

    def train(self):
        self.model.train()
        for epoch in range(self.local_epochs):
            for x, y in self.trainloader:
                self.optimizer.zero_grad()
                loss = self.loss(self.model(x)['output'], y)
                loss.backward()
                self.optimizer.step()

    def test(self):
        self.model.eval()
        test_acc = 0
        loss = 0
        for x, y in self.testloaderfull:
            output = self.model(x)['output']
            loss += self.loss(output, y)
            test_acc += (torch.sum(torch.argmax(output, dim=1) == y)).item()
        return test_acc, loss, y.shape[0]


class Server:
    def __init__(self, model, users):
        self.model = model
        self.users = users
        self.selected_users = users
        self.metrics = {'glob_acc': [], 'glob_loss': []}

    def send_parameters(self):
        for user in self.users:
            user.set_parameters(self.model)

    def aggregate_parameters(self):
        with torch.no_grad():
            for name, param in self.model.named_parameters():
                param.copy_(torch.stack([dict(u.model.named_parameters())[name] for u in self.selected_users]).mean(0))

    def test(self, selected=False):
        num_samples, tot_correct, losses = [], [], []
        users = self.selected_users if selected else self.users
        for c in users:
            ct, c_loss, ns = c.test()
            tot_correct.append(ct * 1.0)
            num_samples.append(ns)
            losses.append(c_loss)
        ids = [c.id for c in self.users]
        return ids, num_samples, tot_correct, losses

    def evaluate(self, save=True, selected=False):
        test_ids, test_samples, test_accs, test_losses = self.test(selected=selected)
        glob_acc = np.sum(test_accs) * 1.0 / np.sum(test_samples)
        glob_loss = np.sum([x * y for (x, y) in zip(test_samples, test_losses)]).item() / np.sum(test_samples)
        if save:
            self.metrics['glob_acc'].append(glob_acc)
            self.metrics['glob_loss'].append(glob_loss)

    def train(self, num_glob_iters=1):
        for glob_iter in range(num_glob_iters):
            self.send_parameters()
            self.evaluate()
            for user in self.selected_users:
                user.train()
            self.aggregate_parameters()


def make_data(n_batches=2, bsz=4):
    return [(torch.randn(bsz, 6), torch.randint(0, 3, (bsz,))) for _ in range(n_batches)]


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Net()
    users = [User(i, model, make_data(), make_data()) for i in range(3)]
    server = Server(model, users)

    ct, c_loss, ns = users[0].test()
    assert c_loss.requires_grad  # the client's test loss comes back attached to the graph

    try:
        server.train(num_glob_iters=1)
        raised = None
    except RuntimeError as e:
        raised = str(e)
    assert raised is not None and "Can't call numpy() on Tensor that requires grad" in raised, raised
    assert server.metrics['glob_loss'] == []
    print("evidence holds: np.sum over the clients' grad-carrying test losses raises before anything is logged")
