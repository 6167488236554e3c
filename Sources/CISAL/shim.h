// Intel ISA-L's inflate (Debian libisal-dev): the same raw deflate streams as zlib, decoded
// about twice as fast on the chunk sizes RFB servers flush (Linux only; see RFB's Inflater).
#include <isa-l/igzip_lib.h>
