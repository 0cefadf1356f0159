# source: https://github.com/xbresson/spectral_graph_convnets/issues/6
# category: DL103
# expect: flag 91
# evidence: the module-level training loop reads loss_train = loss.data[0] from a 0-dim loss and dies with IndexError "invalid index of a 0-dim tensor" on the first batch.
import time
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.autograd import Variable

torch.manual_seed(0)
np.random.seed(0)


class Graph_ConvNet_LeNet5(nn.Module):
    def __init__(self, net_parameters):
        super(Graph_ConvNet_LeNet5, self).__init__()
        D, CL1_F, CL1_K, FC1_F, FC2_F = net_parameters
        self.CL1_K = CL1_K
        self.cl1 = nn.Linear(CL1_K, CL1_F)
        self.fc1 = nn.Linear(D * CL1_F, FC1_F)
        self.fc2 = nn.Linear(FC1_F, FC2_F)

    def graph_conv_cheby(self, x, cl, L, Fout, K):
        B, V, Fin = x.size()
        x0 = x.permute(1, 2, 0).contiguous().view(V, Fin * B)
        xs = [x0]
        if K > 1:
            x1 = L @ x0
            xs.append(x1)
        for k in range(2, K):
            x2 = 2 * (L @ x1) - x0
            xs.append(x2)
            x0, x1 = x1, x2
        x = torch.stack(xs, 0).view(K, V, Fin, B).permute(3, 1, 2, 0).contiguous().view(B * V, Fin * K)
        return cl(x).view(B, V, Fout)

    def forward(self, x, d, L, lmax):
        x = x.unsqueeze(2)
        x = F.relu(self.graph_conv_cheby(x, self.cl1, L, self.cl1.out_features, self.CL1_K))
        x = x.view(x.size(0), -1)
        x = F.dropout(F.relu(self.fc1(x)), d, training=self.training)
        return self.fc2(x)

    def loss(self, y, y_target, l2_regularization):
        loss = nn.CrossEntropyLoss()(y, y_target)
        l2_loss = 0.0
        for param in self.parameters():
            l2_loss += param.pow(2).sum()
        loss += 0.5 * l2_regularization * l2_loss
        return loss

    def evaluation(self, y_predicted, test_l):
        _, class_predicted = torch.max(y_predicted.data, 1)
        return 100.0 * (class_predicted == test_l).sum().item() / y_predicted.size(0)


D, nb_classes = 10, 3
train_data = np.random.randn(40, D).astype(np.float32)
train_labels = np.random.randint(0, nb_classes, 40)
A = np.random.rand(D, D).astype(np.float32)
A = (A + A.T) / 2
L = torch.from_numpy(np.eye(D, dtype=np.float32) - A / A.sum(1, keepdims=True))
lmax = 2.0
net_parameters = [D, 4, 3, 16, nb_classes]
net = Graph_ConvNet_LeNet5(net_parameters)
learning_rate, dropout_value, l2_regularization = 0.05, 0.5, 5e-4
batch_size, num_epochs = 10, 2
train_size = train_data.shape[0]
nb_iter = int(num_epochs * train_size) // batch_size
optimizer = torch.optim.SGD(net.parameters(), lr=learning_rate, momentum=0.9)

if __name__ == "__main__":
    message = ""
    try:
        indices = np.random.permutation(train_size)
        for epoch in range(num_epochs):
            t_start = time.time()
            running_loss = 0.0
            running_accuray = 0
            running_total = 0
            for it in range(train_size // batch_size):
                batch_idx = indices[it * batch_size:(it + 1) * batch_size]
                train_x, train_y = train_data[batch_idx, :], train_labels[batch_idx]
                train_x = Variable(torch.FloatTensor(train_x), requires_grad=False)
                train_y = Variable(torch.LongTensor(train_y.astype(np.int64)), requires_grad=False)
                optimizer.zero_grad()
                y = net.forward(train_x, dropout_value, L, lmax)
                loss = net.loss(y, train_y, l2_regularization)
                loss_train = loss.data[0]
                acc_train = net.evaluation(y, train_y.data)
                loss.backward()
                optimizer.step()
                running_loss += loss_train
                running_accuray += acc_train
                running_total += 1
    except IndexError as e:
        message = str(e)
    assert "invalid index of a 0-dim tensor" in message, message
    print("evidence holds: loss_train = loss.data[0] raised IndexError: %s" % message.split(".")[0])
