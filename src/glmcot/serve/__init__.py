"""glmcot.serve"""
