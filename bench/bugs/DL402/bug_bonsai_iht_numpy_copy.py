# source: https://github.com/microsoft/EdgeML/issues/119
# category: DL402
# expect: flag 14, 81, 82, 83, 84
# evidence: when the IHT phase starts, runHardThrsd passes the W parameter (requires grad) to hardThreshold, whose np.copy calls Tensor.numpy() and raises "Can't call numpy() on Tensor that requires grad".
import numpy as np
import torch
import torch.nn as nn


def hardThreshold(A, s):
    '''
    Hard thresholding function on Tensor A with sparsity s
    '''
    A_ = np.copy(A)
    A_ = A_.ravel()
    if len(A_) > 0:
        th = np.percentile(np.abs(A_), (1 - s) * 100.0, method='higher')
        A_[np.abs(A_) < th] = 0.0
    A_ = A_.reshape(A.shape)
    return A_


def crossEntropyLoss(logits, labels):
    return nn.functional.cross_entropy(logits, labels.argmax(dim=1))


class Bonsai(nn.Module):
    def __init__(self, numClasses, dataDimension, projectionDimension, treeDepth, sigma):
        super().__init__()
        self.numClasses = numClasses
        self.dataDimension = dataDimension
        self.projectionDimension = projectionDimension
        self.treeDepth = treeDepth
        self.sigma = sigma
        self.internalNodes = 2 ** self.treeDepth - 1
        self.totalNodes = 2 * self.internalNodes + 1
        self.Z = nn.Parameter(torch.randn(projectionDimension, dataDimension) * 0.1)
        self.W = nn.Parameter(torch.randn(numClasses * self.totalNodes, projectionDimension) * 0.1)
        self.V = nn.Parameter(torch.randn(numClasses * self.totalNodes, projectionDimension) * 0.1)
        self.T = nn.Parameter(torch.randn(self.internalNodes, projectionDimension) * 0.1)

    def forward(self, X, sigmaI):
        X_ = torch.matmul(self.Z, torch.t(X)) / self.projectionDimension
        W_ = self.W[0:self.numClasses]
        V_ = self.V[0:self.numClasses]
        score_ = torch.matmul(W_, X_) * torch.tanh(self.sigma * torch.matmul(V_, X_))
        for i in range(1, self.totalNodes):
            W_ = self.W[i * self.numClasses:(i + 1) * self.numClasses]
            V_ = self.V[i * self.numClasses:(i + 1) * self.numClasses]
            score_ = score_ + torch.matmul(W_, X_) * torch.tanh(self.sigma * torch.matmul(V_, X_))
        return torch.t(score_), X_


class BonsaiTrainer:
    def __init__(self, bonsaiObj, lW, lT, lV, lZ, sW, sT, sV, sZ, learningRate, device=None):
        self.bonsaiObj = bonsaiObj
        self.lW, self.lV, self.lT, self.lZ = lW, lV, lT, lZ
        self.sW, self.sV, self.sT, self.sZ = sW, sV, sT, sZ
        self.device = "cpu" if device is None else device
        self.learningRate = learningRate
        self.optimizer = torch.optim.Adam(self.bonsaiObj.parameters(), lr=self.learningRate)
        self.isDenseTraining = not (self.sW < 0.99 or self.sV < 0.99 or self.sZ < 0.99 or self.sT < 0.99)

    def loss(self, logits, labels):
        regLoss = 0.5 * (self.lZ * (torch.norm(self.bonsaiObj.Z) ** 2) +
                         self.lW * (torch.norm(self.bonsaiObj.W) ** 2) +
                         self.lV * (torch.norm(self.bonsaiObj.V) ** 2) +
                         self.lT * (torch.norm(self.bonsaiObj.T)) ** 2)
        marginLoss = crossEntropyLoss(logits, labels)
        return marginLoss + regLoss, marginLoss, regLoss

    def runHardThrsd(self):
        '''
        Function to run the IHT routine on Bonsai Obj
        '''
        currW = self.bonsaiObj.W
        currV = self.bonsaiObj.V
        currZ = self.bonsaiObj.Z
        currT = self.bonsaiObj.T

        __thrsdW = hardThreshold(currW.cpu(), self.sW)
        __thrsdV = hardThreshold(currV.cpu(), self.sV)
        __thrsdZ = hardThreshold(currZ.cpu(), self.sZ)
        __thrsdT = hardThreshold(currT.cpu(), self.sT)

        with torch.no_grad():
            self.bonsaiObj.W.copy_(torch.from_numpy(__thrsdW))
            self.bonsaiObj.V.copy_(torch.from_numpy(__thrsdV))
            self.bonsaiObj.Z.copy_(torch.from_numpy(__thrsdZ))
            self.bonsaiObj.T.copy_(torch.from_numpy(__thrsdT))

    def train(self, batchSize, totalEpochs, Xtrain, Ytrain):
        numIters = int(Xtrain.shape[0] / batchSize)
        totalBatches = numIters * totalEpochs
        self.sigmaI = 1
        counter = 0
        trimlevel = 5
        for i in range(totalEpochs):
            for j in range(numIters):
                batchX = Xtrain[j * batchSize:(j + 1) * batchSize]
                batchY = Ytrain[j * batchSize:(j + 1) * batchSize]
                self.optimizer.zero_grad()
                logits, _ = self.bonsaiObj(batchX.to(self.device), self.sigmaI)
                batchLoss, _, _ = self.loss(logits, batchY.to(self.device))
                batchLoss.backward()
                self.optimizer.step()
                # Training routine involving IHT and sparse retraining
                if (counter >= int(totalBatches / 3.0) and
                        (counter < int(2 * totalBatches / 3.0)) and
                        counter % trimlevel == 0 and
                        self.isDenseTraining is False):
                    self.runHardThrsd()
                counter += 1


if __name__ == "__main__":
    torch.manual_seed(0)
    np.random.seed(0)
    Xtrain = torch.randn(40, 6)
    Ytrain = torch.nn.functional.one_hot(torch.randint(0, 3, (40,)), 3).float()
    bonsai = Bonsai(numClasses=3, dataDimension=6, projectionDimension=4, treeDepth=1, sigma=1.0)
    trainer = BonsaiTrainer(bonsai, 1e-3, 1e-3, 1e-3, 1e-4, 0.5, 0.5, 0.5, 0.5, learningRate=0.01)
    try:
        trainer.train(batchSize=8, totalEpochs=3, Xtrain=Xtrain, Ytrain=Ytrain)
    except RuntimeError as e:
        msg = str(e)
    else:
        msg = ""
    assert "numpy()" in msg and "requires grad" in msg, msg
    print("evidence holds: IHT phase raises:", msg)
