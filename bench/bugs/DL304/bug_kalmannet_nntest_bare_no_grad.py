# source: https://github.com/KalmanNet/KalmanNet_TSP/blob/828a2cf529bc84f43b37d543d916fe5858054457/Pipelines/Pipeline_EKF.py
# category: DL304
# expect: flag 107, 111, 112
# evidence: NNTest's bare torch.no_grad() leaves grad mode on: the test estimates carry a graph through every time step, while the CV pass under `with` carries none
import copy
import random
import time
from types import SimpleNamespace

import torch
import torch.nn as nn


class SystemModel:
    def __init__(self, m=2, n=2, T=10):
        self.m, self.n, self.T = m, n, T
        self.F = torch.tensor([[1.0, 0.1], [0.0, 1.0]])
        self.m1x_0 = torch.zeros(m, 1)


class KalmanNetNN(nn.Module):
    def __init__(self, m=2, n=2, hidden=8):
        super().__init__()
        self.m, self.n = m, n
        self.F = torch.eye(m)
        self.gru = nn.GRUCell(m + n, hidden)
        self.fc_gain = nn.Linear(hidden, m * n)
        self.batch_size = 1

    def init_hidden_KNet(self):
        self.h = torch.zeros(self.batch_size, self.gru.hidden_size)

    def InitSequence(self, M1_0, T):
        self.T = T
        self.m1x_posterior = M1_0

    def forward(self, y):
        m1x_prior = torch.matmul(self.F, self.m1x_posterior)
        innovation = y - m1x_prior
        self.h = self.gru(torch.cat([m1x_prior.squeeze(2), innovation.squeeze(2)], dim=1), self.h)
        KGain = self.fc_gain(self.h).reshape(self.batch_size, self.m, self.n)
        self.m1x_posterior = m1x_prior + torch.bmm(KGain, innovation)
        return self.m1x_posterior.squeeze(2)


class Pipeline_EKF:
    def __init__(self, modelName):
        self.modelName = modelName

    def setModel(self, model):
        self.model = model

    def setTrainingParams(self, args):
        self.args = args
        self.N_steps = args.n_steps
        self.N_B = args.n_batch
        self.loss_fn = nn.MSELoss(reduction='mean')
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=args.lr, weight_decay=args.wd)

    def NNTrain(self, SysModel, cv_input, cv_target, train_input, train_target):
        self.N_E = len(train_input)
        self.N_CV = len(cv_input)
        self.MSE_cv_dB_opt = 1000
        for ti in range(0, self.N_steps):
            self.optimizer.zero_grad()
            self.model.train()
            self.model.batch_size = self.N_B
            self.model.init_hidden_KNet()
            n_e = random.sample(range(self.N_E), k=self.N_B)
            y_training_batch = train_input[n_e]
            train_target_batch = train_target[n_e]
            x_out_training_batch = torch.zeros([self.N_B, SysModel.m, SysModel.T])
            self.model.InitSequence(SysModel.m1x_0.reshape(1, SysModel.m, 1).repeat(self.N_B, 1, 1), SysModel.T)
            for t in range(0, SysModel.T):
                x_out_training_batch[:, :, t] = self.model(torch.unsqueeze(y_training_batch[:, :, t], 2))
            MSE_trainbatch_linear_LOSS = self.loss_fn(x_out_training_batch, train_target_batch)
            MSE_trainbatch_linear_LOSS.backward()
            self.optimizer.step()

            # Cross Validation Mode
            self.model.eval()
            self.model.batch_size = self.N_CV
            self.model.init_hidden_KNet()
            with torch.no_grad():
                x_out_cv_batch = torch.empty([self.N_CV, SysModel.m, SysModel.T])
                self.model.InitSequence(SysModel.m1x_0.reshape(1, SysModel.m, 1).repeat(self.N_CV, 1, 1), SysModel.T)
                for t in range(0, SysModel.T):
                    x_out_cv_batch[:, :, t] = self.model(torch.unsqueeze(cv_input[:, :, t], 2))
                MSE_cv_dB = 10 * torch.log10(self.loss_fn(x_out_cv_batch, cv_target))
                if MSE_cv_dB < self.MSE_cv_dB_opt:
                    self.MSE_cv_dB_opt = MSE_cv_dB
                    self.best_model = copy.deepcopy(self.model)
        return x_out_cv_batch

    def NNTest(self, SysModel, test_input, test_target):
        self.model = self.best_model
        self.N_T = test_input.shape[0]
        self.MSE_test_linear_arr = torch.zeros([self.N_T])
        x_out_test = torch.zeros([self.N_T, SysModel.m, SysModel.T])
        loss_fn = nn.MSELoss(reduction='mean')

        # Test mode
        self.model.eval()
        self.model.batch_size = self.N_T
        # Init Hidden State
        self.model.init_hidden_KNet()
        torch.no_grad()

        start = time.time()
        self.model.InitSequence(SysModel.m1x_0.reshape(1, SysModel.m, 1).repeat(self.N_T, 1, 1), SysModel.T)
        for t in range(0, SysModel.T):
            x_out_test[:, :, t] = torch.squeeze(self.model(torch.unsqueeze(test_input[:, :, t], 2)))
        end = time.time()

        for j in range(self.N_T):
            self.MSE_test_linear_arr[j] = loss_fn(x_out_test[j, :, :], test_target[j, :, :]).item()
        self.MSE_test_linear_avg = torch.mean(self.MSE_test_linear_arr)
        self.MSE_test_dB_avg = 10 * torch.log10(self.MSE_test_linear_avg)
        print(self.modelName + "-MSE Test:", float(self.MSE_test_dB_avg), "[dB]", "Inference Time:", end - start)
        return [self.MSE_test_linear_arr, self.MSE_test_linear_avg, self.MSE_test_dB_avg, x_out_test]

def make_data(SysModel, N):
    x = torch.zeros(N, SysModel.m, SysModel.T)
    state = torch.randn(N, SysModel.m, 1)
    for t in range(SysModel.T):
        state = torch.matmul(SysModel.F, state) + 0.05 * torch.randn(N, SysModel.m, 1)
        x[:, :, t] = state.squeeze(2)
    y = x + 0.1 * torch.randn_like(x)
    return y, x

if __name__ == "__main__":
    torch.manual_seed(0)
    random.seed(0)
    sys_model = SystemModel()
    train_input, train_target = make_data(sys_model, 16)
    cv_input, cv_target = make_data(sys_model, 4)
    test_input, test_target = make_data(sys_model, 4)
    args = SimpleNamespace(n_steps=3, n_batch=4, lr=1e-3, wd=1e-4)
    pipeline = Pipeline_EKF("KNet")
    pipeline.setModel(KalmanNetNN())
    pipeline.setTrainingParams(args)
    x_out_cv = pipeline.NNTrain(sys_model, cv_input, cv_target, train_input, train_target)
    assert not x_out_cv.requires_grad

    _, _, _, x_out_test = pipeline.NNTest(sys_model, test_input, test_target)
    assert torch.is_grad_enabled()
    assert x_out_test.requires_grad and x_out_test.grad_fn is not None
    grads = torch.autograd.grad(x_out_test[:, :, -1].sum(), pipeline.model.gru.weight_ih)
    assert grads[0].abs().sum() > 0
    print("evidence holds: CV estimates carry no graph; test estimates keep a graph across all", sys_model.T, "steps")
