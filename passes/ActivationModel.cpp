// ActivationModel.cpp: being written.
