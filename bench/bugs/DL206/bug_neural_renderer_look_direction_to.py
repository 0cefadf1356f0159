# source: https://github.com/daniilidis-group/neural_renderer/pull/52
# category: DL206
# expect: flag 29
# evidence: with the vertices on another device ('meta', standing in for cuda), a torch-function trace of Renderer.transform() shows the tensor returned by direction.to(device) in look() is never used by any later op; the camera direction stays on cpu.
import math
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode


def look(vertices, eye, direction=None, up=None):
    """
    "Look at" transformation of vertices.
    """
    assert (vertices.ndimension() == 3)
    device = vertices.device

    if direction is None:
        direction = torch.from_numpy(np.array([0, 1, 0], np.float32)).to(device)
    if direction is None:
        direction = torch.from_numpy(np.array([0, 1, 0], np.float32)).to(device)
    elif isinstance(direction, list) or isinstance(direction, tuple):
        direction = torch.from_numpy(np.array(direction, np.float32)).to(device)
    elif isinstance(direction, np.ndarray):
        direction = torch.from_numpy(direction).to(device)
    else:
        direction.to(device)

    if isinstance(eye, list) or isinstance(eye, tuple):
        eye = torch.from_numpy(np.array(eye, np.float32)).to(device)
    # if numpy array convert to tensor
    elif isinstance(eye, np.ndarray):
        eye = torch.from_numpy(eye).to(device)
    else:
        eye = eye.to(device)
    if eye.ndimension() == 1:
        eye = eye[None, :]
    if direction.ndimension() == 1:
        direction = direction[None, :]
    if up.ndimension() == 1:
        up = up[None, :]

    # create new axes
    z_axis = F.normalize(direction, eps=1e-5)
    x_axis = F.normalize(torch.cross(up, z_axis, dim=-1), eps=1e-5)
    y_axis = F.normalize(torch.cross(z_axis, x_axis, dim=-1), eps=1e-5)

    # create rotation matrix: [bs, 3, 3]
    r = torch.cat((x_axis[:, None, :], y_axis[:, None, :], z_axis[:, None, :]), dim=1)

    # apply
    # [bs, nv, 3] -> [bs, nv, 3] -> [bs, nv, 3]
    if vertices.shape != eye.shape:
        eye = eye[:, None, :]
    vertices = vertices - eye
    vertices = torch.matmul(vertices, r.transpose(1, 2))

    return vertices


def perspective(vertices, angle=30.):
    width = math.tan(math.radians(angle))
    z = vertices[:, :, 2]
    x = vertices[:, :, 0] / z / width
    y = vertices[:, :, 1] / z / width
    return torch.stack((x, y, z), dim=2)


class Renderer(nn.Module):
    def __init__(self, camera_mode='look', eye=None, camera_direction=None, up=None, viewing_angle=30):
        super(Renderer, self).__init__()
        self.camera_mode = camera_mode
        self.eye = eye if eye is not None else [0, 0, -(1. / math.tan(math.radians(viewing_angle)) + 1)]
        self.camera_direction = camera_direction if camera_direction is not None else [0, 0, 1]
        self.up = up if up is not None else torch.tensor([0., 1., 0.])
        self.viewing_angle = viewing_angle

    def transform(self, vertices):
        if self.camera_mode == 'look':
            vertices = look(vertices, self.eye, self.camera_direction, self.up)
        vertices = perspective(vertices, angle=self.viewing_angle)
        return vertices


class TraceTo(TorchFunctionMode):
    """Records which tensors each torch call consumes and what Tensor.to returns."""

    def __init__(self):
        super().__init__()
        self.to_outputs = []   # (self-tensor id, output tensor)
        self.consumed = []     # ids of tensors passed into later calls
        self.keep = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        for a in list(args) + list(kwargs.values()):
            for t in (a if isinstance(a, (list, tuple)) else [a]):
                if isinstance(t, torch.Tensor):
                    self.consumed.append(id(t))
        out = func(*args, **kwargs)
        if getattr(func, '__name__', '') == 'to' and args and isinstance(args[0], torch.Tensor):
            self.to_outputs.append((id(args[0]), out))
        self.keep.append(out)
        return out


if __name__ == "__main__":
    torch.manual_seed(0)
    camera_direction = torch.tensor([0.2, 0.1, 1.0])
    renderer = Renderer(camera_direction=camera_direction)
    # the vertices live on another device than the camera direction (meta stands in for cuda here)
    vertices = (torch.rand(1, 5, 3) - 0.5).to('meta')

    tracer = TraceTo()
    with tracer:
        out = renderer.transform(vertices)

    direction_to = [o for src, o in tracer.to_outputs if src == id(camera_direction)]
    assert len(direction_to) == 1, tracer.to_outputs
    consumed_after = set(tracer.consumed)
    assert id(direction_to[0]) not in consumed_after, "result of direction.to(device) was used"
    assert out.shape == (1, 5, 3)
    assert direction_to[0].device.type == 'meta' and camera_direction.device.type == 'cpu'
    print("evidence holds: the tensor returned by direction.to(device) is never consumed; look() keeps using the original direction")
