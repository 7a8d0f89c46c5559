"""glmcot.eval"""
