#ifndef ONRAMP_CZLIB_SHIM_H
#define ONRAMP_CZLIB_SHIM_H
#include <zlib.h>
#endif
