"""glmcot.graph"""
