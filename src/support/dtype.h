// The dtype types are public API: include/kiln/dtype.h. This header keeps the layer-relative name.
#pragma once
#include "kiln/dtype.h"
