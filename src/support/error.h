// The error types are public API: include/kiln/error.h. This header keeps the layer-relative name.
#pragma once
#include "kiln/error.h"
