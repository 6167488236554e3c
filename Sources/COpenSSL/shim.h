// OpenSSL 3's libcrypto EVP interface: the punktfunk data plane opens and seals datagrams in place
// with a reused cipher context (no allocation per packet), which swift-crypto's API cannot do.
#include <openssl/evp.h>
