"""From support counts to estimates: the frequency estimators, EM and EMS, ADMM, Wiener
deconvolution, post-processing, error bars, numeric queries and the query language. Imports
`protocols` and `base`."""
