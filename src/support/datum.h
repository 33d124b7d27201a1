// The datum types are public API: include/kiln/datum.h. This header keeps the layer-relative name.
#pragma once
#include "kiln/datum.h"
