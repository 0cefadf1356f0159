# source: https://github.com/yifanjiang19/Pedestrian-Synthesis-GAN/issues/32
# category: DL602
# expect: flag 95, 104
# evidence: backward_D_person feeds the generator's person crop to netD_person without detach, so the discriminator's loss.backward() writes gradients into every generator parameter during the D step.
import torch
import torch.nn as nn


class GANLoss(nn.Module):
    def __init__(self, use_lsgan=True, target_real_label=1.0, target_fake_label=0.0, tensor=torch.FloatTensor):
        super(GANLoss, self).__init__()
        self.real_label = target_real_label
        self.fake_label = target_fake_label
        self.loss = nn.MSELoss() if use_lsgan else nn.BCEWithLogitsLoss()

    def get_target_tensor(self, input, target_is_real):
        return torch.full_like(input, self.real_label if target_is_real else self.fake_label)

    def __call__(self, input, target_is_real):
        return self.loss(input, self.get_target_tensor(input, target_is_real))


class ImagePool():
    def __init__(self, pool_size):
        self.pool_size = pool_size

    def query(self, images):
        return images


class Opt:
    batchSize = 1
    input_nc = 3
    output_nc = 3
    fineSize = 16
    lr = 2e-4
    beta1 = 0.5
    pool_size = 0
    no_lsgan = False
    lambda_A = 100.0


class Pix2PixModel:
    def name(self):
        return 'Pix2PixModel'

    def initialize(self, opt):
        self.opt = opt
        self.netG = nn.Sequential(nn.Conv2d(opt.input_nc, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, opt.output_nc, 3, padding=1), nn.Tanh())
        self.netD_image = nn.Sequential(nn.Conv2d(opt.input_nc + opt.output_nc, 8, 4, 2, 1), nn.LeakyReLU(0.2), nn.Conv2d(8, 1, 3, padding=1))
        self.netD_person = nn.Sequential(nn.Conv2d(opt.input_nc, 8, 3, 2, 1), nn.LeakyReLU(0.2), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 1))

        self.fake_AB_pool = ImagePool(opt.pool_size)
        self.criterionGAN_image = GANLoss(use_lsgan=not opt.no_lsgan)
        self.criterionGAN_person = GANLoss(use_lsgan=opt.no_lsgan)
        self.criterionL1 = torch.nn.L1Loss()

        self.optimizer_G = torch.optim.Adam(self.netG.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
        self.optimizer_D_image = torch.optim.Adam(self.netD_image.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))
        self.optimizer_D_person = torch.optim.Adam(self.netD_person.parameters(), lr=opt.lr, betas=(opt.beta1, 0.999))

    def set_input(self, input):
        self.bbox = input['bbox']
        self.input_A = input['A']
        self.input_B = input['B']

    def forward(self):
        self.real_A = self.input_A
        self.fake_B = self.netG.forward(self.real_A)
        self.real_B = self.input_B

        y, x, w, h = self.bbox
        self.person_crop_real = self.real_B[:, :, y[0]:h[0], x[0]:w[0]]
        self.person_crop_fake = self.fake_B[:, :, y[0]:h[0], x[0]:w[0]]

    def backward_D_image(self):
        # Fake
        # stop backprop to the generator by detaching fake_B
        fake_AB = self.fake_AB_pool.query(torch.cat((self.real_A, self.fake_B), 1))
        self.pred_fake = self.netD_image.forward(fake_AB.detach())
        self.loss_D_image_fake = self.criterionGAN_image(self.pred_fake, False)

        # Real
        real_AB = torch.cat((self.real_A, self.real_B), 1)
        self.pred_real = self.netD_image.forward(real_AB)
        self.loss_D_image_real = self.criterionGAN_image(self.pred_real, True)

        # Combined loss
        self.loss_D_image = (self.loss_D_image_fake + self.loss_D_image_real) * 0.5

        self.loss_D_image.backward()

    def backward_D_person(self):
        #Fake
        self.person_fake = self.netD_person.forward(self.person_crop_fake)
        self.loss_D_person_fake = self.criterionGAN_person(self.person_fake, False)

        #Real
        self.person_real = self.netD_person.forward(self.person_crop_real)
        self.loss_D_person_real = self.criterionGAN_person(self.person_real, True)

        #Combine loss
        self.loss_D_person = (self.loss_D_person_fake + self.loss_D_person_real) * 0.5
        self.loss_D_person.backward()

    def backward_G(self):
        fake_AB = torch.cat((self.real_A, self.fake_B), 1)
        pred_fake_image = self.netD_image.forward(fake_AB)
        self.loss_G_GAN_image = self.criterionGAN_image(pred_fake_image, True)
        self.loss_G_L1 = self.criterionL1(self.fake_B, self.real_B) * self.opt.lambda_A

        pred_fake_person = self.netD_person.forward(self.person_crop_fake)
        self.loss_G_GAN_person = self.criterionGAN_person(pred_fake_person, True)

        self.loss_G = self.loss_G_GAN_image + self.loss_G_L1 + self.loss_G_GAN_person

        self.loss_G.backward()

    def optimize_parameters(self, only_d):

        self.forward()
        self.optimizer_D_image.zero_grad()
        self.backward_D_image()
        self.optimizer_D_image.step()

        self.forward()
        self.optimizer_D_person.zero_grad()
        self.backward_D_person()
        self.optimizer_D_person.step()

        if only_d == False:
            self.forward()
            self.optimizer_G.zero_grad()
            self.backward_G()
            self.optimizer_G.step()


if __name__ == "__main__":
    torch.manual_seed(0)
    model = Pix2PixModel()
    model.initialize(Opt())
    model.set_input({'A': torch.randn(1, 3, 16, 16), 'B': torch.randn(1, 3, 16, 16),
                     'bbox': (torch.tensor([2]), torch.tensor([3]), torch.tensor([11]), torch.tensor([13]))})

    g_grads = {}
    real_d_image = model.backward_D_image
    real_d_person = model.backward_D_person

    def d_image_then_check():
        real_d_image()
        g_grads['after_D_image'] = [p.grad is not None for p in model.netG.parameters()]

    def d_person_then_check():
        real_d_person()
        g_grads['after_D_person'] = [p.grad is not None and p.grad.abs().sum().item() > 0 for p in model.netG.parameters()]

    model.backward_D_image = d_image_then_check
    model.backward_D_person = d_person_then_check
    model.optimize_parameters(only_d=True)

    assert not any(g_grads['after_D_image'])
    assert all(g_grads['after_D_person'])
    print("evidence holds: the detached D_image step left netG without gradients, the D_person step filled all netG gradients")
