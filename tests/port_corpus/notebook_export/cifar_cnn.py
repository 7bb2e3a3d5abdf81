#!/usr/bin/env python
# coding: utf-8

# # Training a small classifier
# 
# Exported from the notebook with `jupyter nbconvert --to script`.

# In[1]:


import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim


# In[2]:


torch.manual_seed(0)
np.random.seed(0)
device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")
print(device)


# In[3]:


# a stand-in for CIFAR: 3x16x16 images of four classes
images = torch.randn(320, 3, 16, 16)
labels = torch.randint(0, 4, (320,))
images[:, 0] += labels.view(-1, 1, 1).float() * 0.5
trainset = torch.utils.data.TensorDataset(images, labels)
trainloader = torch.utils.data.DataLoader(trainset, batch_size=32, shuffle=True)
classes = ("plane", "car", "bird", "cat")


# In[4]:


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 5)
        self.pool = nn.MaxPool2d(2, 2)
        self.conv2 = nn.Conv2d(6, 16, 3)
        self.fc1 = nn.Linear(16 * 2 * 2, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        x = self.pool(F.relu(self.conv1(x)))
        x = self.pool(F.relu(self.conv2(x)))
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.fc2(x)
        return x


net = Net()
net.to(device)


# In[5]:


criterion = nn.CrossEntropyLoss()
optimizer = optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
print("device", next(net.parameters()).device)


# In[6]:


n_steps = 10
step = 0
for epoch in range(2):  # loop over the dataset multiple times
    running_loss = 0.0
    for i, data in enumerate(trainloader, 0):
        # get the inputs; data is a list of [inputs, labels]
        inputs, labels = data[0].to(device), data[1].to(device)

        # zero the parameter gradients
        optimizer.zero_grad()

        # forward + backward + optimize
        outputs = net(inputs)
        loss = criterion(outputs, labels)
        loss.backward()
        optimizer.step()

        # print statistics
        running_loss += loss.item()
        print(f"step {step} loss {loss.item():.6f}")
        step += 1
        if step == n_steps:
            break
    print(f"[{epoch + 1}] running loss: {running_loss / (i + 1):.3f}")
    if step == n_steps:
        break

print("Finished Training")


# In[7]:


correct = 0
total = 0
with torch.no_grad():
    for data in trainloader:
        images, labels = data[0].to(device), data[1].to(device)
        outputs = net(images)
        _, predicted = torch.max(outputs.data, 1)
        total += labels.size(0)
        correct += (predicted == labels).sum().item()

print(f"Accuracy of the network on the train images: {100 * correct // total} %")


# In[ ]:




