// The tensor types are public API: include/kiln/tensor.h. This header keeps the layer-relative name.
#pragma once
#include "kiln/tensor.h"
