import torch

SM_COUNT = torch.cuda.get_device_properties(0).multi_processor_count
