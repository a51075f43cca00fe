#ifndef ONRAMP_CLIBPQ_SHIM_H
#define ONRAMP_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
