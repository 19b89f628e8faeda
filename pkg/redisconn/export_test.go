package redisconn

// SkewErr is skewErr for the tests.
var SkewErr = skewErr
